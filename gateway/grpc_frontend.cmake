# The gRPC frontend (gateway/frontends/grpc_*), included from gateway/CMakeLists.txt after
# infergate_gateway_core is defined:  include(grpc_frontend.cmake)
set(INFERGATE_GRPC_FRONTEND_DIR ${CMAKE_CURRENT_LIST_DIR}/frontends)

add_library(infergate_grpc_frontend STATIC
  ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_frontend.cc
  ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_admin_rpcs.cc
  ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_answer_relay.cc
  ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_infer_common.cc
  ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_model_infer.cc
  ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_native_calls.cc
  ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_native_server.cc
  ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_stream_infer.cc
)
target_include_directories(infergate_grpc_frontend PUBLIC ${PROJECT_SOURCE_DIR})
target_compile_definitions(infergate_grpc_frontend PUBLIC
  INFERGATE_VERSION_STRING="${PROJECT_VERSION}")
target_link_libraries(infergate_grpc_frontend PUBLIC
  infergate_gateway_core infergate_builtin infergate_http infergate_proto infergate_codecs
  gRPC::grpc++)
target_link_libraries(infergate_grpc_frontend PRIVATE infergate_http2)

infergate_add_test(grpc_frontend_test
  SOURCES
    ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_frontend_test.cc
    ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_answer_relay_test.cc
    ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_frontend_leg_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/settings_store_test.cc
  LIBS infergate_grpc_frontend infergate_upstream_test_servers_grpc)

infergate_add_test(grpc_native_server_test
  SOURCES ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_native_server_test.cc
  LIBS infergate_grpc_frontend PkgConfig::NGHTTP2)

infergate_add_test(grpc_native_tls_test
  SOURCES ${INFERGATE_GRPC_FRONTEND_DIR}/grpc_native_tls_test.cc
  LIBS infergate_grpc_frontend infergate_tls infergate_tls_testing)
