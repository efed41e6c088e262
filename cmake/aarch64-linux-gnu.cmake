# Cross build for 64-bit ARM Linux (scripts/arm64_check.sh): Debian's aarch64-linux-gnu-g++, the
# arm64 -dev packages unpacked into NVFP4_ARM64_ROOT (debootstrap --foreign + dpkg -x), tests run
# through qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(NVFP4_ARM64_ROOT "$ENV{NVFP4_ARM64_ROOT}" CACHE PATH "arm64 root with the -dev packages unpacked")
set(CMAKE_FIND_ROOT_PATH "${NVFP4_ARM64_ROOT}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${NVFP4_ARM64_ROOT}/usr/lib/aarch64-linux-gnu")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${NVFP4_ARM64_ROOT}/usr/lib/aarch64-linux-gnu")
# One thread: under qemu-user 7.2 (Debian 12) the first pthread_create of a process that has
# libdnnl (and with it libgomp) loaded never returns, and OpenBLAS's pool spins at load; a
# minimal program with our parallel_for and 2 threads runs there, the same one linked with
# libdnnl hangs (2026-12-01). So the emulated tests run every kernel single-threaded.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu;-E;LD_LIBRARY_PATH=${NVFP4_ARM64_ROOT}/usr/lib/aarch64-linux-gnu:${NVFP4_ARM64_ROOT}/usr/lib/aarch64-linux-gnu/openblas-pthread;-E;OPENBLAS_NUM_THREADS=1;-E;NVFP4_NUM_THREADS=1)
