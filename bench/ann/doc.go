// Package ann measures approximate nearest-neighbour indexes against an
// exact scan over real sentence embeddings: recall@1 and @10, queries per
// second on one goroutine, build time and bytes per vector.
//
// Texts come from the public tool-calling and dialogue data sets (Texts)
// or a file (ReadTexts); their vectors are computed once and kept in an
// append-only cache file (Vectors), because embedding 100,000 texts with
// the built-in encoder takes the better part of an hour on two cores.
package ann
