// Package jsonhttp makes the JSON calls ipfence's programs make to its own
// HTTP APIs (the node's, the simulator's admin API): a body marshalled in,
// a 200 answer unmarshalled out, and any other answer turned into an error
// that carries the server's message.
package jsonhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxAnswer bounds an answer read into memory.
const maxAnswer = 64 << 20

// StatusError is an answer other than 200.
type StatusError struct {
	Method, URL string
	Status      string
	Code        int
	// Message is the server's {"error": …}, or its body when it sent none.
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %s: %s", e.Method, e.URL, e.Status, e.Message)
}

// Do sends method to url with body as JSON (none when nil) and decodes a
// 200 answer into out (ignored when nil).
func Do(ctx context.Context, c *http.Client, method, url string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(data, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		return &StatusError{Method: method, URL: url, Status: resp.Status, Code: resp.StatusCode, Message: e.Error}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}
