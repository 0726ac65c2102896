/* fq_check.h - the CHECK macros of the C/C++ test drivers in csrc/tests.
 * Each driver picks the one that fits it:
 *   #define CHECK FQ_CHECK_ABORT   stop at the first failure (fuzzers, stress tests);
 *   #define CHECK FQ_CHECK_RET     report and `return 1` from the enclosing int function;
 *   #define CHECK FQ_CHECK_COUNT   count every check and failure in g_checks / g_failed
 *                                  (ints the driver defines) and keep going. */
#ifndef FQ_CHECK_H
#define FQ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FQ_CHECK_ABORT(c)                                                          \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                               \
        }                                                                          \
    } while (0)

#define FQ_CHECK_RET(cond, ...)                                              \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            return 1;                                                        \
        }                                                                    \
    } while (0)

#define FQ_CHECK_COUNT(cond, ...)                                            \
    do {                                                                     \
        g_checks++;                                                          \
        if (!(cond)) {                                                       \
            g_failed++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
        }                                                                    \
    } while (0)

#endif
