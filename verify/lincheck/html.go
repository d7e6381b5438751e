package lincheck

import (
	"fmt"
	"html"
	"io"
)

// WriteHTML writes a page of the report. (A full page with the history and
// its linearization is being built.)
func (r *Report) WriteHTML(w io.Writer) error {
	_, err := fmt.Fprintf(w, "<!doctype html><html><title>%s</title><body>%s</body></html>\n", html.EscapeString(r.File), html.EscapeString(r.Summary()))
	return err
}
