package jsonhttp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			w.Write([]byte(`{"got":"` + r.Method + ` ` + r.Header.Get("Content-Type") + `"}`))
		case "/refuse":
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":"no such member"}`))
		default:
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("upstream down\n"))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	var out struct{ Got string }
	if err := Do(ctx, srv.Client(), http.MethodPost, srv.URL+"/echo", map[string]int{"a": 1}, &out); err != nil || out.Got != "POST application/json" {
		t.Fatalf("%v %+v", err, out)
	}
	err := Do(ctx, srv.Client(), http.MethodGet, srv.URL+"/refuse", nil, nil)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 409 || se.Message != "no such member" || err.Error() != "GET "+srv.URL+"/refuse: 409 Conflict: no such member" {
		t.Fatalf("%v", err)
	}
	if err := Do(ctx, srv.Client(), http.MethodGet, srv.URL+"/x", nil, nil); !errors.As(err, &se) || se.Message != "upstream down" {
		t.Fatalf("%v", err)
	}
}
