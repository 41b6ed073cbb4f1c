package server

// Routes lists the server's endpoints as "METHOD /path" in OpenAPI form,
// for the test that holds them against the document.
func Routes(s *Server) []string {
	out := []string{"GET /metrics"}
	for _, rt := range s.table() {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}
