package main

import (
	"flag"
	"strings"
)

// parseAnywhere parses fs's flags wherever they stand among args (before,
// between or after the positional arguments, as `go test` and kubectl
// take them) and returns the positional arguments in order. After "--"
// everything is positional.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// takesValue reports whether the flag arg (such as "-server" or
// "--limit"; not "-limit=5") names a flag of fs that takes a value in the
// next argument: every flag but a boolean one.
func takesValue(fs *flag.FlagSet, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	if strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// firstPositional is the index of the first argument of args that is not
// a flag of fs or a flag's value (-1: none). Flags fs does not know are
// taken for booleans: parsing reports them after.
func firstPositional(fs *flag.FlagSet, args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return i + 1
			}
			return -1
		case len(a) > 1 && a[0] == '-':
			if takesValue(fs, a) {
				i++
			}
		default:
			return i
		}
	}
	return -1
}
