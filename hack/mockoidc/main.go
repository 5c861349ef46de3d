// Command mockoidc serves github.com/oauth2-proxy/mockoidc (a real OIDC provider: discovery,
// authorization code flow, signed ID tokens, userinfo, JWKS) on a loopback address, with a
// fixed client id and secret, for oauth2-proxy to sign people in with in the tests.
//
// mockoidc signs in whoever is next in its user queue (the default user when it is empty):
// POST /queue with a JSON body {"sub", "email", "preferred_username", "groups"} queues the
// next person to sign in. It prints one JSON line (issuer, client id) once it is serving.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/oauth2-proxy/mockoidc"
)

// version is set at build time (-X main.version=...): the mockoidc module version.
var version = "undefined"

type queued struct {
	Subject           string   `json:"sub"`
	Email             string   `json:"email"`
	PreferredUsername string   `json:"preferred_username"`
	Groups            []string `json:"groups"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address of the provider")
	control := flag.String("control-addr", "127.0.0.1:0", "listen address of POST /queue")
	clientID := flag.String("client-id", "swarmkit-web-view", "the OAuth client id")
	clientSecret := flag.String("client-secret", "", "the OAuth client secret (required)")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println("mockoidc " + version)
		return
	}
	if *clientSecret == "" {
		log.Fatal("--client-secret is required")
	}

	m, err := mockoidc.NewServer(nil)
	if err != nil {
		log.Fatal(err)
	}
	m.ClientID, m.ClientSecret = *clientID, *clientSecret
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		log.Fatal(err)
	}

	cln, err := net.Listen("tcp", *control)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /queue", func(w http.ResponseWriter, r *http.Request) {
		var q queued
		if err := json.NewDecoder(r.Body).Decode(&q); err != nil || q.Subject == "" {
			http.Error(w, "want JSON with at least \"sub\"", http.StatusBadRequest)
			return
		}
		m.QueueUser(&mockoidc.MockUser{
			Subject: q.Subject, Email: q.Email, EmailVerified: true,
			PreferredUsername: q.PreferredUsername, Groups: q.Groups,
		})
		w.WriteHeader(http.StatusNoContent)
	})
	go func() { log.Fatal(http.Serve(cln, mux)) }()

	line, _ := json.Marshal(map[string]string{
		"issuer": m.Issuer(), "client_id": m.ClientID, "control": "http://" + cln.Addr().String(),
	})
	fmt.Println(string(line))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	_ = m.Shutdown()
}
