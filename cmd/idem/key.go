package main

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/idem-dev/idem/config"
)

func init() {
	register("key", command{
		summary: "make an API key for a tenant and print the config line holding its hash",
		run:     runKey,
	})
}

const keyUsage = `usage: idem key --tenant T

Prints a new API key on the first line, then the line to add under
auth.keys in the config file. Only the key's SHA-256 goes in the config;
the key itself is shown once and stored nowhere.
`

// keyPrefix marks idem's API keys, so secret scanners can find them.
const keyPrefix = "idem_"

func newAPIKey() string { return keyPrefix + rand.Text() } // 26 base32 characters: 130 random bits

func runKey(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(stderr, keyUsage) }
	tenant := fs.String("tenant", "", "the tenant the key acts for (required)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *tenant == "" {
		fs.Usage()
		return 2
	}
	if err := config.CheckTenant(*tenant); err != nil {
		fmt.Fprintf(stderr, "idem key: --tenant: %v\n", err)
		return 2
	}
	key := newAPIKey()
	sum := sha256.Sum256([]byte(key))
	fmt.Fprintln(stdout, key)
	fmt.Fprintln(stdout, "# add under auth.keys in the config file (the key itself is not stored):")
	fmt.Fprintf(stdout, "  - {tenant: %s, sha256: %x}\n", strconv.Quote(*tenant), sum)
	return 0
}
