package server_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/idem-dev/idem/server"
)

// TestOpenAPIDocument: the committed document is valid OpenAPI 3.1 (as
// far as kin-openapi checks 3.1: structure, references, JSON Schema
// 2020-12 keywords in schemas), and its operations are exactly the
// server's endpoints. Every exchange of the other tests is validated
// against it by the harness's transport (status declared, body and
// headers matching their schemas).
func TestOpenAPIDocument(t *testing.T) {
	doc, _ := openAPI(t)
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	e := start(t, options{})
	served := server.Routes(e.srv)
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Errorf("the document and the server disagree:\ndocumented %v\nserved     %v", documented, served)
	}
	// Every operation documents its errors as problem documents.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if !strings.HasPrefix(path, "/v1/") {
				continue
			}
			for _, code := range []string{"400", "401", "500"} {
				if op.Responses.Value(code) == nil {
					t.Errorf("%s %s does not document %s", method, path, code)
				}
			}
		}
	}
}
