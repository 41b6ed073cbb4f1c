package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/idem-dev/idem/config"
)

func init() {
	register("config", command{
		summary: "config check FILE: validate a config file and print the effective config; config env: list the IDEM_* variables",
		run:     runConfig,
	})
}

const configUsage = `usage: idem config check [FILE]   validate FILE (none: the defaults), with the IDEM_*
                                  variables applied, and print the effective config
       idem config env            list the environment variables that override single keys

Errors name the key and the line: "config: line 12: embedder.provider: ...".
Exit status 0 when valid, 2 when not.
`

func runConfig(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		io.WriteString(stderr, configUsage)
		return 2
	}
	switch args[0] {
	case "check":
		return runConfigCheck(args[1:], stdout, stderr)
	case "env":
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		for _, v := range config.EnvVars() {
			fmt.Fprintf(tw, "%s\t%s\n", v.Name, v.Key)
		}
		tw.Flush()
		return 0
	case "-h", "--help", "help":
		io.WriteString(stdout, configUsage)
		return 0
	}
	fmt.Fprintf(stderr, "idem config: unknown subcommand %q\n", args[0])
	io.WriteString(stderr, configUsage)
	return 2
}

func runConfigCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(stderr, configUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return 2
	}
	cfg, defs, err := loadConfig(fs.Arg(0))
	if err != nil {
		printConfigErrors(stderr, "idem config check", err)
		return 2
	}
	out, err := config.Marshal(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "idem config check: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "# effective configuration (%d tool definitions read)\n", len(defs))
	stdout.Write(out)
	if fs.Arg(0) == "" {
		fmt.Fprintln(os.Stderr, "idem config check: no file given: these are the defaults (with any IDEM_* variables)")
	}
	return 0
}
