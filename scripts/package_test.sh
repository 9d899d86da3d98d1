#!/usr/bin/env bash
# The installed zaris, as a user gets it, from a configured and built BUILD_DIR:
#   1. `cmake --install` into a fresh prefix; libzaris.so exports the C ABI
#      and the C++ API only (cmake/zaris.map); a project outside the tree
#      (tests/package) builds against it with find_package(zaris) and with
#      pkg-config, statically and against libzaris.so, and runs, and so
#      does a C program over the C ABI (zaris/zaris.h);
#   2. `cpack -G DEB` makes libzaris0.3, libzaris-dev and zaris-tools; apt
#      resolves their dependencies on this system (a simulated install);
#      each unpacked into another fresh prefix holds what its part should,
#      and the same consumers build and run against it, zarisctl too.
#
#   scripts/package_test.sh BUILD_DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:?usage: scripts/package_test.sh BUILD_DIR}" && pwd)"
work="$(mktemp -d /tmp/zaris-package-XXXXXX)"
trap '[ -n "${ZARIS_KEEP_PACKAGE_TEST:-}" ] || rm -rf "$work"' EXIT

fail() {
  echo "package_test: $*" >&2
  exit 1
}

# consumers PREFIX LIBDIR: builds tests/package against the zaris in PREFIX
# (its libraries in LIBDIR) both ways, and runs every program built.
consumers() {
  local prefix="$1" libdir="$2" out
  out="$(mktemp -d "$work/consumer-XXXXXX")"
  cmake -S "$root/tests/package" -B "$out/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release > "$out/configure.log" || { cat "$out/configure.log"; fail "configure"; }
  cmake --build "$out/cmake" > "$out/build.log" || { cat "$out/build.log"; fail "cmake build"; }
  # pkg-config finds the .pc in the prefix; its paths are relative to it.
  local pc="$libdir/pkgconfig"
  [ -f "$pc/zaris.pc" ] || fail "no zaris.pc in $pc"
  # shellcheck disable=SC2046  # pkg-config's flags are words
  g++ -std=c++20 -O2 -o "$out/consumer_pc" "$root/tests/package/consumer.cpp" \
    $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs zaris)
  # shellcheck disable=SC2046
  g++ -std=c++20 -O2 -static-libstdc++ -o "$out/consumer_pc_static" \
    "$root/tests/package/consumer.cpp" $(PKG_CONFIG_PATH="$pc" pkg-config --static --cflags zaris) \
    "$libdir/libzaris.a" $(PKG_CONFIG_PATH="$pc" pkg-config --static --libs-only-l zaris | sed 's/-lzaris//')
  # And a C program over the C ABI, against libzaris.so.
  # shellcheck disable=SC2046
  gcc -std=c11 -Wall -Wextra -Werror -pedantic -o "$out/consumer_c" \
    "$root/tests/package/consumer.c" $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs zaris)
  local program
  for program in "$out/cmake/consumer" "$out/cmake/consumer_static" "$out/consumer_pc" \
    "$out/consumer_pc_static"; do
    grep -qx "consumer OK" <<< "$(LD_LIBRARY_PATH="$libdir" "$program")" || fail "$program failed"
  done
  grep -qx "c consumer OK" <<< "$(LD_LIBRARY_PATH="$libdir" "$out/consumer_c")" ||
    fail "consumer_c failed"
  # The shared builds use the installed libzaris.so, the static ones none.
  # (Each listing is read whole before grep looks: grep -q on a pipe would
  # cut the writer off, which pipefail reports as a failure.)
  grep -q "$libdir/libzaris.so.$soversion" <<< "$(LD_LIBRARY_PATH="$libdir" ldd "$out/cmake/consumer")" ||
    fail "consumer does not use $libdir/libzaris.so.$soversion"
  if grep -q libzaris <<< "$(ldd "$out/cmake/consumer_static")"; then
    fail "consumer_static uses libzaris.so"
  fi
  echo "package_test: consumers built and ran against $prefix"
}

# 1. cmake --install
cmake --install "$build" --prefix "$work/installed" > "$work/install.log"
libdir="$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")"
version="$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")"
soversion="$(readlink "$build/libzaris.so")"  # libzaris.so.0.3
soversion="${soversion#libzaris.so.}"
# libzaris.so exports the C ABI and the C++ API, nothing below them.
exports="$(nm -D --defined-only -C "$work/installed/$libdir/libzaris.so.$soversion")"
if grep -E "zaris::(engine|segment|detail|coordination)::|::Impl::" <<< "$exports"; then
  fail "libzaris.so exports the symbols above, which are not the API's"
fi
for function in $(grep -oE '\bzaris_[a-z_]+\(' "$root/include/zaris/zaris.h" | tr -d '(' | sort -u); do
  grep -qE " ${function}(@@ZARIS_[0-9.]+)?$" <<< "$exports" || fail "libzaris.so does not export $function"
done
consumers "$work/installed" "$work/installed/$libdir"

# 2. the Debian packages
(cd "$build" && cpack -G DEB > "$work/cpack.log") || { cat "$work/cpack.log"; fail "cpack"; }
debs=()
for package in "libzaris${soversion}_${version}" "libzaris-dev_${version}" "zaris-tools_${version}"; do
  found=("$build/${package}"_*.deb)
  [ -f "${found[0]}" ] || fail "cpack made no ${package}_*.deb"
  debs+=("${found[0]}")
done
# apt would install them here (every dependency resolves), in a dry run.
apt-get install --simulate --no-install-recommends "${debs[@]}" > "$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; fail "apt cannot install the packages"; }
# What each holds.
expect() {  # expect DEB PATH...: DEB holds each PATH (a regex on dpkg-deb -c)
  local deb="$1" listing
  shift
  listing="$(dpkg-deb -c "$deb")"
  for path in "$@"; do
    grep -qE "\./usr/$path( |$)" <<< "$listing" || fail "$(basename "$deb") lacks /usr/$path"
  done
}
expect "${debs[0]}" "$libdir/libzaris\.so\.${soversion//./\\.}" "$libdir/libzaris\.so\.${version//./\\.}"
expect "${debs[1]}" "include/zaris/zaris\.hpp" "$libdir/libzaris\.so" "$libdir/libzaris\.a" \
  "$libdir/cmake/zaris/zarisConfig\.cmake" "$libdir/pkgconfig/zaris\.pc"
expect "${debs[2]}" "bin/zarisctl" "share/man/man1/zarisctl\.1(\.gz)?" \
  "share/bash-completion/completions/zarisctl" "lib/systemd/system/zaris-janitor@\.service"
# The runtime package's shlibs (for packages built against it) and ldconfig trigger.
grep -qx "libzaris $soversion libzaris$soversion (= $version)" <<< \
  "$(dpkg-deb --ctrl-tarfile "${debs[0]}" | tar -xO ./shlibs)" || fail "libzaris$soversion's shlibs"
grep -qx "activate-noawait ldconfig" <<< "$(dpkg-deb --ctrl-tarfile "${debs[0]}" | tar -xO ./triggers)" ||
  fail "libzaris$soversion's ldconfig trigger"
grep -qF "libzaris$soversion (= $version)" <<< "$(dpkg-deb -f "${debs[1]}" Depends)" ||
  fail "libzaris-dev's Depends"
# zarisctl uses libzaris0.3, or, built with the etcd backend, the static
# libzaris beside it and gRPC (docs/etcd.md: libzaris-etcd.so is a plan).
tools_depends="$(dpkg-deb -f "${debs[2]}" Depends)"
if readelf -d "$build/tools/zarisctl" | grep -q "NEEDED.*\[libgrpc++"; then
  grep -qF "libgrpc++" <<< "$tools_depends" || fail "zaris-tools' Depends lacks libgrpc++"
else
  grep -qF "libzaris$soversion (= $version)" <<< "$tools_depends" || fail "zaris-tools' Depends"
fi
unpacked="$work/unpacked"
for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$unpacked"; done
grep -q "^ExecStart=/usr/bin/zarisctl " < "$unpacked/usr/lib/systemd/system/zaris-janitor@.service" ||
  fail "the janitor's unit does not run /usr/bin/zarisctl"
LD_LIBRARY_PATH="$unpacked/usr/$libdir" "$unpacked/usr/bin/zarisctl" --version > /dev/null ||
  fail "the packaged zarisctl does not run"
consumers "$unpacked/usr" "$unpacked/usr/$libdir"
echo "package_test: OK ($(cd "$build" && ls ./*.deb | tr '\n' ' '))"
