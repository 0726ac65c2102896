#!/usr/bin/env bash
# Builds the native libraries that fastq's wheel links statically, from Debian 12
# ("bookworm") source packages pinned by version and checked by SHA-256:
#
#   zlib 1.2.13, libpng 1.6.39, libwebp 1.2.4, libjpeg-turbo 2.1.5 (with its SIMD,
#   needs nasm), libtiff 4.5.0 (zlib/deflate, JPEG, LZW, PackBits; no tools), OpenCV
#   4.6.0 (core, imgproc, imgcodecs only).
#
# Debian's own patches (debian/patches/series: the security fixes of libpng, libwebp
# and libtiff, libjpeg-turbo's SIMD initialisation fix) are applied, so the code is what
# Debian 12 ships.  Everything is built as static archives with -fPIC and
# -fvisibility=hidden; fastq's setup.py links them (FASTQ_VENDORED_PREFIX) and
# exports only PyInit_* from its extensions.
#
# The result is cached: ${FASTQ_DEPS_CACHE:-$HOME/.cache/fastq-deps}/<key>, where
# <key> hashes this script without its comments (versions, hashes, flags) and the
# compiler, cmake and nasm versions.  A second run with the same key prints the
# prefix and exits at once.
# Downloaded archives are kept in <cache>/src; put them there yourself to build
# offline.  Logs go to stderr; the last line on stdout is the install prefix.
#
# The archives are fetched with apt's own client (`apt-get source --download-only
# PKG=VERSION`) from the Debian archive this machine's apt already uses: the script
# turns the deb entries of FASTQ_APT_SOURCES (default: the system's
# /etc/apt/sources.list.d/debian.sources) into deb-src entries in a private apt
# directory under the cache, so the system's apt setup is left untouched.
#
# Toolchains (FASTQ_TOOLCHAIN):
#   system (default)  cc/c++ from PATH, for this machine's architecture.  Linked on
#                     Debian 12 this gives a manylinux_2_34 wheel.
#   zig               scripts/zig_toolchain.sh: `zig cc` targeting glibc 2.17
#                     (manylinux2014) for FASTQ_TARGET_ARCH (x86_64 or aarch64, default
#                     this machine's), cross-compiling where it differs.
# The toolchain and the target architecture are part of the cache key, so builds made
# with different toolchains never mix; each gets its own prefix, and the symlink
# <cache>/latest-<toolchain>-<arch> names the newest (plain <cache>/latest: system).
#
# Needs: a C/C++ compiler (or zig through pip), cmake >= 3.16, ninja, nasm (x86-64),
# apt-get, tar/xz/bzip2, patch.
# `build_deps.sh --key` prints the cache key only.
# Knobs: FASTQ_DEPS_CACHE, FASTQ_DEPS_JOBS (default: nproc), FASTQ_APT_SOURCES,
#        FASTQ_DEPS_NICE (default 10), FASTQ_TOOLCHAIN, FASTQ_TARGET_ARCH.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${FASTQ_DEPS_CACHE:-$HOME/.cache/fastq-deps}
APT_SOURCES=${FASTQ_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}
JOBS=${FASTQ_DEPS_JOBS:-$(nproc 2>/dev/null || echo 2)}
NICE=${FASTQ_DEPS_NICE:-10}
TOOLCHAIN=${FASTQ_TOOLCHAIN:-system}
ARCH=${FASTQ_TARGET_ARCH:-$(uname -m)}
case $TOOLCHAIN/$ARCH in
    system/"$(uname -m)") CMAKE_TC=() ;;
    system/*) echo "[build_deps] error: FASTQ_TARGET_ARCH=$ARCH needs FASTQ_TOOLCHAIN=zig (the system compiler builds for $(uname -m))" >&2; exit 1 ;;
    zig/x86_64|zig/aarch64)
        TC=$(bash "$(dirname "${BASH_SOURCE[0]}")/zig_toolchain.sh" "$ARCH")
        # shellcheck disable=SC1091
        . "$TC/env.sh"
        CMAKE_TC=(-DCMAKE_TOOLCHAIN_FILE="$TC/toolchain.cmake") ;;
    *) echo "[build_deps] error: FASTQ_TOOLCHAIN=$TOOLCHAIN FASTQ_TARGET_ARCH=$ARCH is not supported (system, or zig with x86_64/aarch64)" >&2; exit 1 ;;
esac
CC=${CC:-cc}
CXX=${CXX:-c++}

# name  version  source-package  file  sha256
SOURCES="
zlib 1:1.2.13.dfsg-1 zlib zlib_1.2.13.dfsg.orig.tar.bz2 71feb7947e3c00ef125f83b79a4e529bde31171e5babe48b391f06758d1ab0a1
zlib 1:1.2.13.dfsg-1 zlib zlib_1.2.13.dfsg-1.debian.tar.xz f66cf3d4f2d7defcd4d1fd1fb0a11ee39f1e01b42ec7d059c9dc5c1695133c44
libpng 1.6.39-2+deb12u5 libpng1.6 libpng1.6_1.6.39.orig.tar.gz a00e9d2f2f664186e4202db9299397f851aea71b36a35e74910b8820e380d441
libpng 1.6.39-2+deb12u5 libpng1.6 libpng1.6_1.6.39-2+deb12u5.debian.tar.xz ab14906eda9fddf14cbb1e589b9ba7439c22e233dc3c5e3cf9356c9625565a82
libwebp 1.2.4-0.2+deb12u1 libwebp libwebp_1.2.4.orig.tar.gz 7bf5a8a28cc69bcfa8cb214f2c3095703c6b73ac5fba4d5480c205331d9494df
libwebp 1.2.4-0.2+deb12u1 libwebp libwebp_1.2.4-0.2+deb12u1.debian.tar.xz 69cdba4dfe2e1b34d55fa80c1b29c31cacd40dd183812d6bcca7e508a2f7afcd
libjpeg-turbo 1:2.1.5-2 libjpeg-turbo libjpeg-turbo_2.1.5.orig.tar.gz 254f3642b04e309fee775123133c6464181addc150499561020312ec61c1bf7c
libjpeg-turbo 1:2.1.5-2 libjpeg-turbo libjpeg-turbo_2.1.5-2.debian.tar.xz cdb2433c2f7101345c1ffa14efb943787c675b86354691a32490845fe4bc9237
tiff 4.5.0-6+deb12u4 tiff tiff_4.5.0.orig.tar.bz2 638f43d7dea33948d5dee7f39572fc0194d9cc3c74195de9dd26a4388a1f880a
tiff 4.5.0-6+deb12u4 tiff tiff_4.5.0-6+deb12u4.debian.tar.xz 4ee50a8cdf74a184d94e65a04f3c9de466cb0b74ef5393fb5ca65666fccb864b
opencv 4.6.0+dfsg-12 opencv opencv_4.6.0+dfsg.orig.tar.xz 40a59ba7e5c18a43652de0a08733c9843a39bba619b1f3e26a5fac4a6f041423
opencv 4.6.0+dfsg-12 opencv opencv_4.6.0+dfsg-12.debian.tar.xz a3c65bda575969bec08b9fb66b3e4a7d71ff59980843358ff6febfc8af25e5ee
"
# Debian's OpenCV patches touch contrib modules, Qt, OGRE, LAPACK, FFmpeg and the docs;
# the one that matters for a static core/imgproc/imgcodecs build keeps the build
# directory out of the binaries.
OPENCV_PATCHES="0008-Do-not-embed-build-directory-in-binaries.patch"

# Flags shared by every library.  -O2 for the C libraries as Debian builds them
# (libjpeg-turbo's hot loops are SIMD assembly either way); OpenCV uses its own
# Release flags (-O3) plus the CPU baseline/dispatch below.
CFLAGS_DEPS="-O2 -fPIC -fvisibility=hidden -ffunction-sections -fdata-sections"
CXXFLAGS_DEPS="$CFLAGS_DEPS -fvisibility-inlines-hidden"
case $ARCH in
    x86_64) OPENCV_CPU="-DCPU_BASELINE=SSE4_2 -DCPU_DISPATCH=AVX,FP16,AVX2,AVX512_SKX" ;;
    # ARMv8-A: every AArch64 CPU has NEON and half-float conversion, and OpenCV 4.6 knows
    # no other AArch64 extension, so its NEON code is the baseline (its default there):
    # the universal intrinsics compile to NEON; there is nothing to dispatch at run time.
    aarch64) OPENCV_CPU="-DCPU_BASELINE=NEON,FP16 -DCPU_DISPATCH=" ;;
    *) OPENCV_CPU="" ;;
esac

log() { echo "[build_deps] $*" >&2; }
die() { echo "[build_deps] error: $*" >&2; exit 1; }

need_tools() {
    local miss=""
    local tools="make cmake ninja tar xz bzip2 patch sha256sum"
    [ "$ARCH" != x86_64 ] || tools="$tools nasm"  # libjpeg-turbo's x86 SIMD
    [ "$TOOLCHAIN" != system ] || tools="$tools cc c++"
    for t in $tools; do
        command -v "$t" >/dev/null 2>&1 || miss="$miss $t"
    done
    [ -z "$miss" ] || die "missing build tools:$miss (install them with: bash scripts/setup.sh --wheel; or on Debian: apt-get install build-essential nasm xz-utils bzip2 patch; pip install cmake ninja)"
}

tool_versions() {
    echo "toolchain $TOOLCHAIN ${FASTQ_TOOLCHAIN_ID:-} target $ARCH"
    $CC --version | head -1
    $CXX --version | head -1
    cmake --version | head -1
    [ "$ARCH" != x86_64 ] || nasm -v
}

cache_key() {
    # What the built libraries depend on: the archives (file + SHA-256), the patches,
    # the flags, the build steps (this script from unpack() on, without comments), the
    # tools.  Not how the archives are fetched.
    { echo "$SOURCES" | awk 'NF {print $4, $5}'
      echo "$OPENCV_PATCHES|$CFLAGS_DEPS|$CXXFLAGS_DEPS|$OPENCV_CPU"
      sed -n '/^unpack() {/,$p' "$HERE/build_deps.sh" | grep -v -E '^\s*#'
      tool_versions; } | sha256sum | cut -c1-16
}

APT_DIR=""
apt_setup() {  # a private apt directory whose sources are the deb-src twins of APT_SOURCES
    [ -z "$APT_DIR" ] || return 0
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found: put the archives listed in SOURCES into $CACHE/src"
    [ -f "$APT_SOURCES" ] || die "no $APT_SOURCES: set FASTQ_APT_SOURCES to a deb822 .sources file of Debian 12, or put the archives listed in SOURCES into $CACHE/src"
    APT_DIR="$CACHE/apt"
    mkdir -p "$APT_DIR/sources.list.d" "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
    sed -E 's/^Types:.*/Types: deb-src/' "$APT_SOURCES" > "$APT_DIR/sources.list.d/fastq-deps.sources"
    APT_OPTS=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$APT_DIR/sources.list.d"
              -o Dir::State::Lists="$APT_DIR/lists" -o Dir::Cache="$APT_DIR/cache")
    log "apt-get update (deb-src of $APT_SOURCES, private lists in $APT_DIR)"
    apt-get "${APT_OPTS[@]}" update -qq >&2 || die "apt-get update of the deb-src lists failed"
}

fetch() {  # file source-package version sha256
    local f=$1 pkg=$2 ver=$3 sum=$4 dst="$CACHE/src/$1"
    if [ ! -f "$dst" ]; then
        apt_setup
        log "apt-get source --download-only $pkg=$ver"
        (cd "$CACHE/src" && apt-get "${APT_OPTS[@]}" source --download-only -qq "$pkg=$ver" >&2) ||
            die "apt-get source $pkg=$ver failed (is that version still in the archive?)"
        [ -f "$dst" ] || die "apt-get source $pkg=$ver did not give $f"
    fi
    echo "$sum  $dst" | sha256sum -c --status || {
        mv "$dst" "$dst.bad"
        die "SHA-256 mismatch for $f (moved to $dst.bad); expected $sum"
    }
}

unpack() {  # name -> prints source dir; applies Debian patches
    local name=$1 orig="" deb="" f
    for f in $(echo "$SOURCES" | awk -v n="$name" '$1 == n {print $4}'); do
        case $f in *.debian.tar.*) deb=$f ;; *) orig=$f ;; esac
    done
    local dir="$WORK/$name"
    rm -rf "$dir"
    mkdir -p "$dir"
    tar -xf "$CACHE/src/$orig" -C "$dir" --strip-components=1
    tar -xf "$CACHE/src/$deb" -C "$dir"
    local series="$dir/debian/patches/series" list p
    if [ "$name" = opencv ]; then
        list=$OPENCV_PATCHES
    else
        list=$(grep -v -E '^\s*(#|$)' "$series" || true)
    fi
    for p in $list; do
        patch -d "$dir" -p1 -s --forward < "$dir/debian/patches/$p" >&2 || die "$name: Debian patch $p does not apply"
    done
    echo "$dir"
}

cmake_build() {  # srcdir builddir args...
    local src=$1 bld=$2
    shift 2
    # -I the stage: the libraries built before (zlib.h, jpeglib.h) come from here, never
    # from the build machine's /usr/include (zig's sysroot has none anyway).
    nice -n "$NICE" cmake -S "$src" -B "$bld" -G Ninja -Wno-dev \
        -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_INSTALL_PREFIX="$STAGE" \
        -DCMAKE_INSTALL_LIBDIR=lib \
        -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
        -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
        -DCMAKE_C_FLAGS="$CFLAGS_DEPS -I$STAGE/include" \
        -DCMAKE_CXX_FLAGS="$CXXFLAGS_DEPS -I$STAGE/include" \
        -DBUILD_SHARED_LIBS=OFF \
        "${CMAKE_TC[@]}" \
        "$@" >"$bld.configure.log" 2>&1 || { tail -40 "$bld.configure.log" >&2; die "configure failed: $src"; }
    nice -n "$NICE" cmake --build "$bld" -j "$JOBS" >"$bld.build.log" 2>&1 || { tail -40 "$bld.build.log" >&2; die "build failed: $src"; }
    cmake --install "$bld" >"$bld.install.log" 2>&1 || { tail -20 "$bld.install.log" >&2; die "install failed: $src"; }
}

link_latest() {  # key
    if [ "$TOOLCHAIN" = system ]; then ln -sfn "$1" "$CACHE/latest"; fi
    ln -sfn "$1" "$CACHE/latest-$TOOLCHAIN-$ARCH"
}

main() {
    if [ "${1:-}" = "--key" ]; then  # print the cache key and stop
        cache_key
        return 0
    fi
    need_tools
    local key
    key=$(cache_key)
    PREFIX="$CACHE/$key"
    if [ -f "$PREFIX/.complete" ]; then
        log "cached: $PREFIX"
        link_latest "$key"
        echo "$PREFIX"
        return 0
    fi
    mkdir -p "$CACHE/src"
    exec 9>"$CACHE/.lock-$key"
    flock 9 2>/dev/null || true  # another build of the same key waits here; other keys build at once
    if [ -f "$PREFIX/.complete" ]; then
        echo "$PREFIX"
        return 0
    fi
    local t0=$SECONDS
    exec 8>"$CACHE/.lock-src"
    flock 8 2>/dev/null || true  # one download at a time into $CACHE/src
    while read -r name ver pkg f sum; do
        [ -n "$name" ] || continue
        fetch "$f" "$pkg" "$ver" "$sum"
    done <<<"$SOURCES"
    exec 8>&-

    WORK="$CACHE/work-$key"
    STAGE="$PREFIX.partial"
    rm -rf "$WORK" "$STAGE"
    mkdir -p "$WORK" "$STAGE/licenses"
    local z png webp jt tif cv

    log "zlib"
    z=$(unpack zlib)
    # Debian's dfsg tarball drops win32/, which zlib's CMakeLists needs: use its configure.
    (cd "$z" && CC="$CC" AR="${AR:-ar}" RANLIB="${RANLIB:-ranlib}" CFLAGS="$CFLAGS_DEPS" nice -n "$NICE" ./configure --static --prefix="$STAGE" \
        && nice -n "$NICE" make -j "$JOBS" libz.a && make install) >"$WORK/b-zlib.log" 2>&1 \
        || { tail -30 "$WORK/b-zlib.log" >&2; die "zlib build failed"; }
    cp "$z/LICENSE" "$STAGE/licenses/zlib.LICENSE"

    log "libpng"
    png=$(unpack libpng)
    cmake_build "$png" "$WORK/b-png" -DPNG_SHARED=OFF -DPNG_STATIC=ON -DPNG_TESTS=OFF \
        -DPNG_BUILD_ZLIB=ON -DZLIB_INCLUDE_DIR="$STAGE/include" -DZLIB_LIBRARY="$STAGE/lib/libz.a" \
        -DSKIP_INSTALL_PROGRAMS=ON -DSKIP_INSTALL_EXECUTABLES=ON
    cp "$png/LICENSE" "$STAGE/licenses/libpng.LICENSE"

    log "libwebp"
    webp=$(unpack libwebp)
    cmake_build "$webp" "$WORK/b-webp" -DWEBP_BUILD_ANIM_UTILS=OFF -DWEBP_BUILD_CWEBP=OFF \
        -DWEBP_BUILD_DWEBP=OFF -DWEBP_BUILD_GIF2WEBP=OFF -DWEBP_BUILD_IMG2WEBP=OFF \
        -DWEBP_BUILD_VWEBP=OFF -DWEBP_BUILD_WEBPINFO=OFF -DWEBP_BUILD_WEBPMUX=OFF \
        -DWEBP_BUILD_EXTRAS=OFF -DWEBP_BUILD_WEBP_JS=OFF
    cat "$webp/COPYING" "$webp/PATENTS" >"$STAGE/licenses/libwebp.LICENSE"

    log "libjpeg-turbo"
    jt=$(unpack libjpeg-turbo)
    cmake_build "$jt" "$WORK/b-jpeg" -DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DWITH_TURBOJPEG=OFF \
        -DWITH_SIMD=ON -DREQUIRE_SIMD=ON -DWITH_JAVA=OFF -DCMAKE_INSTALL_LIBDIR="$STAGE/lib"
    cat "$jt/LICENSE.md" "$jt/README.ijg" >"$STAGE/licenses/libjpeg-turbo.LICENSE"

    log "libtiff"
    tif=$(unpack tiff)
    # Codecs: none, PackBits, LZW, (Adobe) Deflate through our zlib, JPEG through our
    # libjpeg-turbo, plus the simple ones libtiff always has.  No external codec
    # libraries (JBIG, LERC, LZMA, ZSTD, WebP, libdeflate), no old-style JPEG, no C++ API.
    cmake_build "$tif" "$WORK/b-tiff" -Dtiff-tools=OFF -Dtiff-tests=OFF -Dtiff-contrib=OFF -Dtiff-docs=OFF \
        -Dtiff-deprecated=OFF -Dcxx=OFF -Dzlib=ON -Djpeg=ON -Dold-jpeg=OFF -Djpeg12=OFF -Djbig=OFF -Dlerc=OFF \
        -Dlzma=OFF -Dzstd=OFF -Dwebp=OFF -Dlibdeflate=OFF -Dpixarlog=OFF \
        -DZLIB_INCLUDE_DIR="$STAGE/include" -DZLIB_LIBRARY="$STAGE/lib/libz.a" \
        -DJPEG_INCLUDE_DIR="$STAGE/include" -DJPEG_LIBRARY="$STAGE/lib/libjpeg.a" \
        -DCMAKE_DISABLE_FIND_PACKAGE_Deflate=ON -DCMAKE_DISABLE_FIND_PACKAGE_JBIG=ON \
        -DCMAKE_DISABLE_FIND_PACKAGE_LERC=ON -DCMAKE_DISABLE_FIND_PACKAGE_LibLZMA=ON \
        -DCMAKE_DISABLE_FIND_PACKAGE_ZSTD=ON -DCMAKE_DISABLE_FIND_PACKAGE_WebP=ON
    grep -E "^-- +(ZLIB|Macintosh|LZW|Pixar|JPEG|Old JPEG|ISO JBIG|LERC|LZMA2|ZSTD|WEBP) " "$WORK/b-tiff.configure.log" >&2 || true
    cp "$tif/LICENSE.md" "$STAGE/licenses/libtiff.LICENSE"

    log "OpenCV (core, imgproc, imgcodecs)"
    cv=$(unpack opencv)
    # shellcheck disable=SC2086
    cmake_build "$cv" "$WORK/b-opencv" \
        -DBUILD_LIST=core,imgproc,imgcodecs -DBUILD_opencv_apps=OFF -DBUILD_opencv_world=OFF \
        -DBUILD_TESTS=OFF -DBUILD_PERF_TESTS=OFF -DBUILD_EXAMPLES=OFF -DBUILD_DOCS=OFF \
        -DBUILD_JAVA=OFF -DBUILD_opencv_python2=OFF -DBUILD_opencv_python3=OFF -DBUILD_opencv_js=OFF \
        -DBUILD_ZLIB=OFF -DBUILD_PNG=OFF -DBUILD_JPEG=OFF -DBUILD_WEBP=OFF -DBUILD_TIFF=OFF \
        -DBUILD_OPENEXR=OFF -DBUILD_OPENJPEG=OFF -DBUILD_JASPER=OFF -DBUILD_IPP_IW=OFF -DBUILD_ITT=OFF \
        -DWITH_PNG=ON -DWITH_JPEG=ON -DWITH_WEBP=ON -DWITH_TIFF=ON \
        -DWITH_IMGCODEC_PXM=ON -DWITH_IMGCODEC_PFM=OFF -DWITH_IMGCODEC_HDR=OFF -DWITH_IMGCODEC_SUNRASTER=OFF \
        -DWITH_OPENEXR=OFF -DWITH_OPENJPEG=OFF -DWITH_JASPER=OFF -DWITH_GDAL=OFF -DWITH_GDCM=OFF \
        -DWITH_IPP=OFF -DWITH_ITT=OFF -DWITH_OPENCL=OFF -DWITH_TBB=OFF -DWITH_OPENMP=OFF -DWITH_PTHREADS_PF=ON \
        -DWITH_EIGEN=OFF -DWITH_LAPACK=OFF -DWITH_PROTOBUF=OFF -DWITH_QUIRC=OFF -DWITH_ADE=OFF \
        -DWITH_FFMPEG=OFF -DWITH_GSTREAMER=OFF -DWITH_V4L=OFF -DWITH_1394=OFF -DWITH_GTK=OFF -DWITH_QT=OFF \
        -DWITH_VTK=OFF -DWITH_OPENGL=OFF -DWITH_CUDA=OFF -DWITH_VA=OFF -DWITH_VA_INTEL=OFF \
        -DWITH_OPENVX=OFF -DWITH_HALIDE=OFF -DWITH_VULKAN=OFF -DWITH_ONNX=OFF -DWITH_CAROTENE=OFF \
        -DWITH_OPENCLAMDFFT=OFF -DWITH_OPENCLAMDBLAS=OFF -DWITH_IMGCODEC_GIF=OFF \
        -DOPENCV_GENERATE_PKGCONFIG=OFF -DOPENCV_ENABLE_NONFREE=OFF -DENABLE_PRECOMPILED_HEADERS=OFF \
        -DOPENCV_SKIP_PYTHON_LOADER=ON -DINSTALL_CREATE_DISTRIB=ON \
        -DZLIB_INCLUDE_DIR="$STAGE/include" -DZLIB_LIBRARY="$STAGE/lib/libz.a" -DZLIB_LIBRARY_RELEASE="$STAGE/lib/libz.a" \
        -DPNG_PNG_INCLUDE_DIR="$STAGE/include" -DPNG_LIBRARY="$STAGE/lib/libpng16.a" -DPNG_LIBRARY_RELEASE="$STAGE/lib/libpng16.a" \
        -DJPEG_INCLUDE_DIR="$STAGE/include" -DJPEG_LIBRARY="$STAGE/lib/libjpeg.a" -DJPEG_LIBRARY_RELEASE="$STAGE/lib/libjpeg.a" \
        -DWEBP_INCLUDE_DIR="$STAGE/include" -DWEBP_LIBRARY="$STAGE/lib/libwebp.a" \
        -DTIFF_INCLUDE_DIR="$STAGE/include" -DTIFF_LIBRARY="$STAGE/lib/libtiff.a" -DTIFF_LIBRARY_RELEASE="$STAGE/lib/libtiff.a" \
        $OPENCV_CPU
    grep -E "^-- +(Media I/O|ZLib|JPEG|WEBP|PNG|TIFF|PXM|Baseline|Dispatched code|requested|Parallel framework)" \
        "$WORK/b-opencv.configure.log" >&2 || true
    cat "$cv/LICENSE" >"$STAGE/licenses/opencv.LICENSE"
    cp "$WORK/b-opencv.configure.log" "$STAGE/opencv-configure.log"

    # Record what went in, for the wheel's notice file and for humans.
    {
        echo "# fastq vendored native libraries (static), built by scripts/build_deps.sh"
        echo "# key $key"
        echo "$SOURCES" | awk 'NF {print $1, $2, $4, "sha256:" $5}'
        echo "CFLAGS: $CFLAGS_DEPS"
        echo "OpenCV CPU: $OPENCV_CPU"
        echo "target: $ARCH, toolchain: $TOOLCHAIN"
        tool_versions
    } >"$STAGE/BUILDINFO.txt"
    rm -rf "$PREFIX"
    mv "$STAGE" "$PREFIX"
    touch "$PREFIX/.complete"
    link_latest "$key"
    rm -rf "$WORK"
    log "built in $((SECONDS - t0)) s: $PREFIX"
    echo "$PREFIX"
}

main "$@"
