# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ONNX for kten::onnx (import and export), only when asked for: KTEN_ENABLE_ONNX is an explicit
# choice (ON in the presets), never switched on because the library happens to be installed.
# kten links the ONNX project's protobuf classes and checker privately: <kten/onnx.hpp> includes
# neither protobuf nor ONNX headers. Without it, kten::onnx's calls throw kten::Error saying so.
if(NOT KTEN_ENABLE_ONNX)
  message(STATUS "kten: ONNX not built (KTEN_ENABLE_ONNX=OFF): kten::onnx::load and save throw")
  return()
endif()

find_package(Protobuf QUIET)
find_package(ONNX CONFIG QUIET)
# The targets' names: onnx and onnx_proto up to ONNX 1.17 (Debian 12's 1.12), ONNX::onnx and
# ONNX::onnx_proto from 1.18 on. KTEN_ONNX_PROTO is the protobuf classes, KTEN_ONNX_LIBRARIES those
# and the checker.
if(TARGET ONNX::onnx AND TARGET ONNX::onnx_proto)
  set(KTEN_ONNX_PROTO ONNX::onnx_proto)
  set(KTEN_ONNX_LIBRARIES ONNX::onnx ONNX::onnx_proto)
elseif(TARGET onnx AND TARGET onnx_proto)
  set(KTEN_ONNX_PROTO onnx_proto)
  set(KTEN_ONNX_LIBRARIES onnx onnx_proto)
endif()
if(NOT Protobuf_FOUND OR NOT ONNX_FOUND OR NOT KTEN_ONNX_PROTO)
  message(FATAL_ERROR
    "kten: KTEN_ENABLE_ONNX is ON but CMake found no ONNX library (ONNXConfig.cmake with the onnx and "
    "onnx_proto targets, or ONNX::onnx and ONNX::onnx_proto) or no protobuf. Install them (Debian 12: apt-get install libonnx-dev, which "
    "brings libprotobuf-dev; scripts/setup does), point CMake at yours (-DONNX_DIR=<dir of "
    "ONNXConfig.cmake>, -DProtobuf_ROOT=<prefix>), or configure with -DKTEN_ENABLE_ONNX=OFF to build "
    "kten without kten::onnx.")
endif()
message(STATUS "kten: ONNX ${ONNX_VERSION} (${ONNX_DIR}), protobuf ${Protobuf_VERSION}")
