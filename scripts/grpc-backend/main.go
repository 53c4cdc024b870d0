// Command grpc-backend is the gRPC server behind Sluice and nginx in the gRPC benchmarks and the
// lab's gRPC churn: grpc-go's interop TestService (UnaryCall answers with a payload of the size the
// request asks for; FullDuplexCall echoes) plus the health and reflection services, so that ghz can
// call it by reflection without a .proto file. It also serves Envoy's ext_authz Check (authz.go),
// the auth server of the ExternalAuth tests.
//
//	grpc-backend --listen 127.0.0.1:50051 [--listen ...] --name pod-1
//
// Every response carries the server's name in the `x-backend` header, so a test can see which pod
// answered. It stops on SIGTERM after finishing the calls in flight (GracefulStop), like a pod.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
)

type listenFlags []string

func (l *listenFlags) String() string     { return strings.Join(*l, ",") }
func (l *listenFlags) Set(v string) error { *l = append(*l, v); return nil }

type testService struct {
	testgrpc.UnimplementedTestServiceServer
	name string
}

func (s *testService) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	grpc.SetHeader(ctx, metadata.Pairs("x-backend", s.name))
	return &testgrpc.Empty{}, nil
}

func (s *testService) UnaryCall(ctx context.Context, in *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	grpc.SetHeader(ctx, metadata.Pairs("x-backend", s.name))
	size := in.GetResponseSize()
	if size < 0 || size > 4<<20 {
		return nil, fmt.Errorf("response_size %d out of range", size)
	}
	return &testgrpc.SimpleResponse{Payload: &testgrpc.Payload{Body: make([]byte, size)}}, nil
}

func (s *testService) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	stream.SetHeader(metadata.Pairs("x-backend", s.name))
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		for _, p := range in.GetResponseParameters() {
			body := make([]byte, p.GetSize())
			if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: body}}); err != nil {
				return err
			}
		}
	}
}

func main() {
	var listen listenFlags
	flag.Var(&listen, "listen", "address to serve on (repeatable)")
	name := flag.String("name", "grpc-backend", "name sent in the x-backend response header")
	flag.Parse()
	if len(listen) == 0 {
		log.Fatal("grpc-backend: at least one --listen address is needed")
	}
	server := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(server, &testService{name: *name})
	healthpb.RegisterHealthServer(server, health.NewServer())
	reflection.Register(server)
	authv3.RegisterAuthorizationServer(server, authzService{})
	// The addresses as bound: a port 0 is the kernel's choice, which the caller needs to read.
	bound := make([]string, 0, len(listen))
	for _, address := range listen {
		lis, err := net.Listen("tcp", address)
		if err != nil {
			log.Fatalf("grpc-backend: %v", err)
		}
		bound = append(bound, lis.Addr().String())
		go func() {
			if err := server.Serve(lis); err != nil {
				log.Printf("grpc-backend: %v", err)
			}
		}()
	}
	fmt.Printf("grpc-backend %s listening on %s\n", *name, strings.Join(bound, ","))
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	server.GracefulStop()
}
