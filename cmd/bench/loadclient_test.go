package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLeanClient_ReadsWhatNetHTTPWrites: the lean client reads the
// answers net/http's server writes — with a length, chunked, with
// Connection: close — sends the request's body and key, and keeps one
// connection for calls in turn.
func TestLeanClient_ReadsWhatNetHTTPWrites(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/echo":
			if r.Header.Get("Idempotency-Key") == "k1" {
				w.Header().Set("Idempotent-Replayed", "true")
			}
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(r.Method + " " + r.Header.Get("Idempotency-Key") + " " + string(body)))
		case "/chunked":
			for i := range 3 {
				w.Write([]byte(strings.Repeat(string(rune('a'+i)), 5000)))
				w.(http.Flusher).Flush()
			}
		case "/close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	c, err := newLoadClient("lean", addr, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.closeIdle()
	ctx := context.Background()
	var a loadAnswer
	for i, tc := range []struct {
		method, path, key, body string
		status                  int
		replayed                bool
		want                    string
	}{
		{"POST", "/echo", "k1", `{"x":1}`, 201, true, `POST k1 {"x":1}`},
		{"POST", "/echo", "", `{}`, 201, false, `POST  {}`},
		{"GET", "/echo", "k2", "", 201, false, `GET k2 `},
		{"GET", "/chunked", "", "", 200, false, strings.Repeat("a", 5000) + strings.Repeat("b", 5000) + strings.Repeat("c", 5000)},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		if err := c.do(ctx, tc.method, "http://"+addr+tc.path, body, tc.key, &a); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if a.status != tc.status || a.replayed != tc.replayed || string(a.body) != tc.want {
			t.Fatalf("call %d: status %d replayed %v body %.80q; want %d %v %.80q", i, a.status, a.replayed, a.body, tc.status, tc.replayed, tc.want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for four calls in turn, want 1", n)
	}
	// An answer with Connection: close is read whole; the next call dials.
	if err := c.do(ctx, "GET", "http://"+addr+"/close", nil, "", &a); err != nil || string(a.body) != "bye" {
		t.Fatalf("close: %v %q", err, a.body)
	}
	if err := c.do(ctx, "POST", "http://"+addr+"/echo", []byte("z"), "", &a); err != nil || string(a.body) != "POST  z" {
		t.Fatalf("after close: %v %q", err, a.body)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections after a Connection: close answer, want 2", n)
	}
	if err := c.do(ctx, "GET", "http://elsewhere:1/echo", nil, "", &a); err == nil {
		t.Fatal("a URL on another address was sent")
	}
}

// TestLeanClient_RefusesMalformedAnswers: a status line, a header or a
// chunk that is not HTTP/1.1 is an error, and bounded.
func TestLeanClient_RefusesMalformedAnswers(t *testing.T) {
	for _, raw := range []string{
		"HTTP/1.1 2x1 Created\r\n\r\n",
		"SPDY/9 201 Created\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nX: " + strings.Repeat("y", loadHeaderBytesMax) + "\r\n\r\n",
		"HTTP/1.1 200 OK\r\n" + strings.Repeat("X: y\r\n", loadHeadersMax+1) + "\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			c.Read(buf)
			io.WriteString(c, raw)
			c.Close()
		}()
		c, _ := newLoadClient("lean", ln.Addr().String(), 1)
		var a loadAnswer
		err = c.do(context.Background(), "GET", "http://"+ln.Addr().String()+"/", nil, "", &a)
		ln.Close()
		if err == nil {
			t.Fatalf("answer %.60q was accepted (status %d, body %q)", raw, a.status, a.body)
		}
	}
}
