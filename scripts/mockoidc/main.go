// mockoidc-serve: an OpenID Connect provider for Sluice's external-auth tests, built on
// github.com/oauth2-proxy/mockoidc (the provider oauth2-proxy's own tests use). It signs every
// authorization request in as mockoidc's default user (jane.doe@example.com) without a login
// form, so a test can follow the browser's redirects end to end.
//
//	mockoidc-serve -listen 127.0.0.1:0 -client-id ID -client-secret SECRET
//
// prints the issuer URL as its one line on stdout once it listens, and serves until stdin
// closes (the test that started it went away) or it gets SIGTERM.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/oauth2-proxy/mockoidc"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	clientID := flag.String("client-id", "sluice-test", "the OAuth client ID to accept")
	clientSecret := flag.String("client-secret", "sluice-test-secret", "the OAuth client secret to accept")
	flag.Parse()

	provider, err := mockoidc.NewServer(nil)
	if err != nil {
		log.Fatalf("mockoidc: %v", err)
	}
	provider.ClientID = *clientID
	provider.ClientSecret = *clientSecret
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listen %s: %v", *listen, err)
	}
	if err := provider.Start(ln, nil); err != nil {
		log.Fatalf("mockoidc: %v", err)
	}
	fmt.Println(provider.Issuer())

	done := make(chan struct{}, 2)
	go func() {
		io.Copy(io.Discard, os.Stdin)
		done <- struct{}{}
	}()
	go func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
		<-signals
		done <- struct{}{}
	}()
	<-done
	provider.Shutdown()
}
