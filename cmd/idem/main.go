// Command idem is the single binary of the idem service: it runs the
// server and the operator tools as subcommands.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	_ "time/tzdata" // typed.timezone works on hosts without a zoneinfo database
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// A command runs one subcommand. It reads flags from args (without the
// subcommand's name) and returns the process exit status: 0 on success,
// 2 on bad input or usage, 1 on any other failure.
type command struct {
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// commands lists every subcommand; each lives in its own file.
var commands = map[string]command{}

func register(name string, c command) { commands[name] = c }

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "idem: unknown command %q (run 'idem help')\n", args[0])
		return 2
	}
	return c.run(args[1:], stdin, stdout, stderr)
}

func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("usage: idem <command> [flags]\n\ncommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, commands[n].summary)
	}
	io.WriteString(w, b.String())
}

func init() {
	register("version", command{
		summary: "print the version",
		run: func(_ []string, _ io.Reader, stdout, _ io.Writer) int {
			fmt.Fprintf(stdout, "idem %s\n", version)
			return 0
		},
	})
}
