// Command idem is the single binary of the idem service: it runs the
// server and the operator tools as subcommands.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	_ "time/tzdata" // typed.timezone works on hosts without a zoneinfo database
)

// version, when set at build time with -ldflags "-X main.version=…",
// replaces the module version the build info holds.
var version = ""

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
		summary: "print the version, the commit it was built from and the Go version",
		run: func(_ []string, _ io.Reader, stdout, _ io.Writer) int {
			info, _ := debug.ReadBuildInfo()
			io.WriteString(stdout, versionText(info, version))
			return 0
		},
	})
}

// versionText describes the build: the module version (override, when
// set, else the build info's: a tag, a pseudo-version from the commit, or
// "(devel)"), then the VCS revision, its time and whether the tree had
// uncommitted changes (go build records them when it builds in a git
// checkout), and the Go version and platform. info may be nil.
func versionText(info *debug.BuildInfo, override string) string {
	v, rev, at, modified, goVersion := override, "", "", "", runtime.Version()
	if info != nil {
		if v == "" {
			v = info.Main.Version
		}
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = " (with uncommitted changes)"
				}
			}
		}
	}
	if v == "" {
		v = "(unknown)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "idem %s\n", v)
	if rev != "" {
		fmt.Fprintf(&b, "revision %s%s\n", rev, modified)
	} else {
		b.WriteString("revision unknown (built outside a git checkout, or with -buildvcs=false)\n")
	}
	if at != "" {
		fmt.Fprintf(&b, "time     %s\n", at)
	}
	fmt.Fprintf(&b, "go       %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
