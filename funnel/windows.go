package funnel

import "strings"

// pieces splits a text view into the pieces the model reads whole
// (Windows) and counts its tokens (the encoder queue's unit of cost).
// Without a tokenizer the view is one piece of about a token per four
// bytes.
func (f *Funnel) pieces(text string) ([]string, int, error) {
	if f.tok == nil {
		return []string{text}, len(text)/4 + 1, nil
	}
	whole, err := f.tok.Tokenize(text)
	if err != nil {
		return nil, 0, err
	}
	if whole.Count() <= f.tok.MaxTokens() {
		return []string{text}, whole.Count(), nil
	}
	ws, err := Windows(f.tok, text)
	return ws, whole.Count(), err
}

// Windows splits text at word boundaries into pieces of at most
// tok.MaxTokens() tokens: each piece holds as many words as fit, and a
// single word longer than the model reads is a piece of its own (cut by
// the model). A text that fits is one piece. The bench harness embeds
// texts the same way.
func Windows(tok Tokenizer, text string) ([]string, error) {
	limit := tok.MaxTokens()
	fits := func(s string) (bool, error) {
		t, err := tok.Tokenize(s)
		return t.Count() <= limit, err
	}
	whole, err := tok.Tokenize(text)
	if err != nil {
		return nil, err
	}
	if whole.Count() <= limit {
		return []string{text}, nil
	}
	words := strings.Fields(text)
	// A first guess at words per window from the text's tokens per word,
	// shrunk until the window fits.
	per := max(1, len(words)*limit*9/(10*whole.Count()))
	var out []string
	for start := 0; start < len(words); {
		n := min(per, len(words)-start)
		piece := strings.Join(words[start:start+n], " ")
		for n > 1 {
			ok, err := fits(piece)
			if err != nil {
				return nil, err
			}
			if ok {
				break
			}
			n = max(1, n*3/4)
			piece = strings.Join(words[start:start+n], " ")
		}
		out = append(out, piece)
		start += n
	}
	return out, nil
}
