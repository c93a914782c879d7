# Every dependency is a Debian 12 package (scripts/packages.txt); found here, once.

find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(simdjson CONFIG REQUIRED)
find_package(ZLIB REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(CURL REQUIRED)
pkg_check_modules(NGHTTP2 REQUIRED IMPORTED_TARGET libnghttp2)
pkg_check_modules(LIBEVENT REQUIRED IMPORTED_TARGET libevent_core libevent_pthreads libevent_openssl)

find_path(HTTP_PARSER_INCLUDE_DIR http_parser.h REQUIRED)
find_library(HTTP_PARSER_LIBRARY http_parser REQUIRED)
add_library(infergate_http_parser INTERFACE)
target_include_directories(infergate_http_parser INTERFACE ${HTTP_PARSER_INCLUDE_DIR})
target_link_libraries(infergate_http_parser INTERFACE ${HTTP_PARSER_LIBRARY})

if(INFERGATE_TESTS)
  find_package(GTest REQUIRED)
endif()
if(INFERGATE_BENCH)
  find_package(benchmark CONFIG REQUIRED)
  find_package(RapidJSON QUIET)
  find_path(RAPIDJSON_INCLUDE_DIR rapidjson/document.h REQUIRED)
endif()

find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# The infergate binary's malloc: mimalloc (libmimalloc-dev) when found, glibc's otherwise
# or when asked (-DINFERGATE_ALLOCATOR=system). Never under a sanitizer, which replaces
# malloc itself. gateway/allocator.h says why; `infergate version` says which one runs.
set(INFERGATE_ALLOCATOR "mimalloc" CACHE STRING "malloc of the infergate binary: mimalloc or system")
set_property(CACHE INFERGATE_ALLOCATOR PROPERTY STRINGS mimalloc system)
set(INFERGATE_HAVE_MIMALLOC OFF)
if(INFERGATE_ALLOCATOR STREQUAL "mimalloc" AND NOT (INFERGATE_SANITIZE OR INFERGATE_TSAN OR INFERGATE_FUZZ))
  find_package(mimalloc CONFIG QUIET)
  if(mimalloc_FOUND)
    set(INFERGATE_HAVE_MIMALLOC ON)
    message(STATUS "infergate: mimalloc ${mimalloc_VERSION} is the binary's malloc")
  else()
    message(WARNING "infergate: mimalloc not found (scripts/setup installs libmimalloc-dev); "
                    "the binary uses glibc's malloc")
  endif()
elseif(NOT INFERGATE_ALLOCATOR MATCHES "^(mimalloc|system)$")
  message(FATAL_ERROR "INFERGATE_ALLOCATOR: mimalloc or system, not '${INFERGATE_ALLOCATOR}'")
endif()

# CUDA is optional: found -> the CUDA shared-memory code is built against the static
# runtime, so one binary runs with or without a GPU.
set(INFERGATE_HAVE_CUDA OFF)
if(INFERGATE_CUDA)
  if(EXISTS /usr/local/cuda AND NOT CUDAToolkit_ROOT)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(INFERGATE_HAVE_CUDA ON)
    message(STATUS "infergate: CUDA ${CUDAToolkit_VERSION} found; CUDA shared memory enabled")
  else()
    message(STATUS "infergate: CUDA toolkit not found; CUDA shared memory disabled")
  endif()
endif()
