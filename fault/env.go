package fault

import (
	"fmt"
	"slices"
	"strings"
)

// EnvVar is the environment variable pingcap/failpoint arms failpoints
// from, in a build with failpoints compiled in: name=terms[;name=terms…].
const EnvVar = "GO_FAILPOINTS"

// knownListedMax bounds the known names an unknown-name error lists: the
// catalog has dozens, and the error is one line on a terminal.
const knownListedMax = 10

// CheckEnv refuses a GO_FAILPOINTS value (spec) that names a failpoint
// this build does not have. pingcap/failpoint arms any name it is given,
// and Eval asks only for cataloged ones, so a misspelt name would arm
// nothing, silently: a fault test would then pass without its fault. The
// known names are the catalog's and, in the self-test build only, the
// planted bugs' (elsewhere arming one does nothing). A malformed entry is
// left to pingcap/failpoint, which exits on it before main runs.
func CheckEnv(spec string) error {
	if spec == "" {
		return nil
	}
	known := knownNames()
	for _, entry := range strings.Split(spec, ";") {
		name, _, _ := strings.Cut(entry, "=")
		name = strings.TrimSpace(name)
		if !slices.Contains(known, name) {
			return fmt.Errorf("%s names unknown failpoint %q; known: %s", EnvVar, name, listKnown(known, name))
		}
	}
	return nil
}

func knownNames() []string {
	return append(Names(""), plantedArmable()...)
}

// listKnown lists at most knownListedMax known names, those of the
// unknown name's layer (the part before "/") first: the likeliest meant.
func listKnown(known []string, unknown string) string {
	layer, _, _ := strings.Cut(unknown, "/")
	var same, other []string
	for _, n := range known {
		if strings.HasPrefix(n, layer+"/") {
			same = append(same, n)
		} else {
			other = append(other, n)
		}
	}
	ordered := append(same, other...)
	if len(ordered) <= knownListedMax {
		return strings.Join(ordered, ", ")
	}
	return fmt.Sprintf("%s, … (%d more: fault/catalog.go)", strings.Join(ordered[:knownListedMax], ", "), len(ordered)-knownListedMax)
}
