package main

// gobench httpd: the Go peer of the HTTP section (bench/http_bench.py), a
// net/http static-file server as a Go user writes one.
//
//	gobench httpd --root DIR [--port P]     (P = 0: any free port; default 8080)
//
// Listens on 127.0.0.1 and prints "listening on 127.0.0.1:<port>" once it
// accepts. The driver runs it with GOMAXPROCS=1 under taskset -c 0, as the
// other servers have one CPU.
//
// Files are served with http.ServeContent on an http.Dir, which is what
// http.FileServer does (Content-Type from the extension, Content-Length,
// Last-Modified, ranges and conditional requests, sendfile for the body)
// without its one redirect that would get in the way: FileServer and
// ServeFile answer any path ending in "/index.html" with a 301 to "./",
// and the benchmark asks for /index.html. A directory serves its
// index.html; there are no listings. net/http keeps connections alive and
// honours "Connection: close" (it answers with the header and closes).

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
)

func fileHandler(root http.Dir) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := path.Clean("/" + r.URL.Path)
		f, err := root.Open(name) // http.Dir refuses to leave the root
		if err == nil {
			if st, e := f.Stat(); e == nil && st.IsDir() {
				f.Close()
				f, err = root.Open(strings.TrimSuffix(name, "/") + "/index.html")
			}
		}
		if err != nil {
			switch {
			case errors.Is(err, fs.ErrNotExist):
				http.Error(w, "404 page not found", http.StatusNotFound)
			case errors.Is(err, fs.ErrPermission):
				http.Error(w, "403 forbidden", http.StatusForbidden)
			default:
				http.Error(w, "500 internal server error", http.StatusInternalServerError)
			}
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || st.IsDir() {
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		http.ServeContent(w, r, st.Name(), st.ModTime(), f)
	})
}

func benchHttpd(args []string) {
	fl := flag.NewFlagSet("httpd", flag.ContinueOnError)
	root := fl.String("root", "", "directory to serve (required)")
	port := fl.Int("port", 8080, "TCP port on 127.0.0.1 (0: any free port)")
	if err := fl.Parse(args); err != nil {
		badUsage("httpd: %v", err)
	}
	if fl.NArg() != 0 {
		badUsage("unexpected argument %q", fl.Arg(0))
	}
	if *root == "" {
		badUsage("httpd needs --root DIR")
	}
	if st, err := os.Stat(*root); err != nil || !st.IsDir() {
		fmt.Fprintf(os.Stderr, "gobench httpd: root %s: not a directory\n", *root)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "gobench httpd: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("listening on 127.0.0.1:%d\n", ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	srv := &http.Server{Handler: fileHandler(http.Dir(*root))}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintf(os.Stderr, "gobench httpd: %v\n", err)
		os.Exit(1)
	}
}
