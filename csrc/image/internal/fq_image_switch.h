/* fq_image_switch.h - the process-wide on/off switch of an optional fast path (the SIMD
 * kernels, the restart-segment decode): on by default unless its environment variable is
 * "0" when the library loads; set and read from any thread (relaxed atomics: the paths it
 * selects give the same bytes, so no ordering is needed). */
#ifndef FQ_IMAGE_SWITCH_H
#define FQ_IMAGE_SWITCH_H

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace fqi {

class Switch {
  public:
    explicit Switch(const char *env) : on_(default_on(env)) {}
    void set(int on) { on_.store(on ? 1 : 0, std::memory_order_relaxed); }
    int get() const { return on_.load(std::memory_order_relaxed); }

  private:
    static int default_on(const char *env)
    {
        const char *e = std::getenv(env);
        return (e && std::strcmp(e, "0") == 0) ? 0 : 1;
    }
    std::atomic<int> on_;
};

}  // namespace fqi

#endif
