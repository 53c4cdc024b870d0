package main

// Envoy's ext_authz gRPC service (envoy.service.auth.v3.Authorization), for the tests of
// Gateway API's ExternalAuth with `protocol: GRPC`. Its decision is made from the request it is
// asked about, so a test can drive every outcome from the client:
//
//	x-authz: allow       OK; the request gains x-auth-user (the client's x-user, else "anonymous"),
//	                     x-auth-path, x-auth-method, x-auth-host, x-auth-headers (the header names
//	                     received, sorted) and x-auth-body (the body received, quoted, with its
//	                     size); x-auth-tag is appended to the client's; x-remove-me is removed;
//	                     the client's answer gains x-auth-said: ok
//	x-authz: deny        PERMISSION_DENIED with a denied_response: 401, www-authenticate,
//	                     body "denied by ext-authz"
//	x-authz: deny-plain  PERMISSION_DENIED without a denied_response (the proxy's default: 403)
//	x-authz: broken      the call fails (UNAVAILABLE), not a decision
//	anything else        UNAUTHENTICATED with a denied_response 403, body "no x-authz"

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type authzService struct {
	authv3.UnimplementedAuthorizationServer
}

func header(key, value string, appendValue bool) *corev3.HeaderValueOption {
	option := &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, Value: value}}
	if appendValue {
		option.Append = wrapperspb.Bool(true)
	}
	return option
}

func (authzService) Check(_ context.Context, request *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	http := request.GetAttributes().GetRequest().GetHttp()
	headers := http.GetHeaders()
	switch headers["x-authz"] {
	case "allow":
		user := headers["x-user"]
		if user == "" {
			user = "anonymous"
		}
		names := make([]string, 0, len(headers))
		for name := range headers {
			names = append(names, name)
		}
		sort.Strings(names)
		body := http.GetBody()
		if raw := http.GetRawBody(); len(raw) > 0 {
			body = string(raw)
		}
		return &authv3.CheckResponse{
			Status: &rpcstatus.Status{Code: int32(codes.OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
				Headers: []*corev3.HeaderValueOption{
					header("x-auth-user", user, false),
					header("x-auth-path", http.GetPath(), false),
					header("x-auth-method", http.GetMethod(), false),
					header("x-auth-host", http.GetHost(), false),
					header("x-auth-headers", strings.Join(names, ","), false),
					header("x-auth-body", fmt.Sprintf("%d %q", http.GetSize(), body), false),
					header("x-auth-tag", "from-authz", true),
				},
				HeadersToRemove:      []string{"x-remove-me"},
				ResponseHeadersToAdd: []*corev3.HeaderValueOption{header("x-auth-said", "ok", false)},
			}},
		}, nil
	case "deny":
		return &authv3.CheckResponse{
			Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)},
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
				Headers: []*corev3.HeaderValueOption{header("www-authenticate", `Bearer realm="authz"`, false)},
				Body:    "denied by ext-authz",
			}},
		}, nil
	case "deny-plain":
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)}}, nil
	case "broken":
		return nil, status.Error(codes.Unavailable, "the auth server is broken on purpose")
	default:
		return &authv3.CheckResponse{
			Status: &rpcstatus.Status{Code: int32(codes.Unauthenticated)},
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
				Status: &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
				Body:   "no x-authz",
			}},
		}, nil
	}
}
