// The gRPC ceiling: a bare grpc++ callback server whose ModelInfer answers every call with
// the same ModelInferResponse (the `simple` model's outputs), doing no other work.
//   bare_grpc_server [PORT] [raw]     (PORT 0 or none: any free port on 127.0.0.1)
// Typed (default): the generated protobuf classes, as a plain grpc++ service parses the
// request and serializes its response. raw: ModelInfer on grpc::ByteBuffer, the request
// left unparsed and the response serialized once (the floor of grpc itself).
// Prints "listening PORT" once serving; runs until killed.

#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "grpc_service.grpc.pb.h"

using Svc = inference::GRPCInferenceService;

inference::ModelInferResponse fixedResponse() {
  inference::ModelInferResponse response;
  response.set_model_name("simple");
  response.set_model_version("1");
  for (const char* name : {"OUTPUT0", "OUTPUT1"}) {
    auto* output = response.add_outputs();
    output->set_name(name);
    output->set_datatype("INT32");
    output->add_shape(1);
    output->add_shape(16);
    response.add_raw_output_contents(std::string(64, '\1'));
  }
  return response;
}

class TypedService final : public Svc::CallbackService {
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    *response = response_;
    response->set_id(request->id());
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  const inference::ModelInferResponse response_ = fixedResponse();
};

class RawService final : public Svc::WithRawCallbackMethod_ModelInfer<Svc::Service> {
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer*, grpc::ByteBuffer* response) override {
    *response = response_;  // shares the slice
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::Slice bytes_{fixedResponse().SerializeAsString()};
  const grpc::ByteBuffer response_{&bytes_, 1};
};

int main(int argc, char** argv) {
  int port = argc > 1 ? std::atoi(argv[1]) : 0;
  TypedService typed;
  RawService raw;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port),
                           grpc::InsecureServerCredentials(), &port);
  if (argc > 2 && std::strcmp(argv[2], "raw") == 0) {
    builder.RegisterService(&raw);
  } else {
    builder.RegisterService(&typed);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return 1;
  std::cout << "listening " << port << std::endl;
  server->Wait();
}
