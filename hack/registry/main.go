// Command registry serves an in-memory OCI registry (go-containerregistry's) for the chart
// tests: over TLS when given a certificate, behind HTTP basic authentication when given a
// user, with answers slowed down when asked to. Test use only.
package main

import (
	"crypto/subtle"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	cert := flag.String("cert", "", "TLS certificate (PEM); plain HTTP without it")
	key := flag.String("key", "", "TLS key (PEM)")
	user := flag.String("user", "", "user:password required (HTTP basic); none without it")
	slow := flag.Duration("slow", 0, "delay before each answer")
	flag.Parse()

	handler := registry.New(registry.Logger(log.New(os.Stderr, "", log.LstdFlags)))
	if *user != "" {
		name, password, _ := strings.Cut(*user, ":")
		inner := handler
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(name)) != 1 ||
				subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	if *slow > 0 {
		inner := handler
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(*slow)
			inner.ServeHTTP(w, r)
		})
	}
	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	// The tests read the port from this line.
	fmt.Printf("listening on %s\n", listener.Addr())
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	if *cert != "" {
		log.Fatal(server.ServeTLS(listener, *cert, *key))
	}
	log.Fatal(server.Serve(listener))
}
