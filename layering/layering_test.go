package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/tsgate/tsgate"

// allowed lists, for each package of the module, the packages of the
// module it may import directly. A package missing here fails the test, so
// a new package has to take a place in the layering.
var allowed = map[string][]string{
	"tiers":                 {},
	"merge":                 {},
	"params":                {"tiers"},
	"router":                {"tiers"},
	"partial":               {"merge", "tiers"},
	"cache":                 {"tiers"},
	"sizing":                {"tiers"},
	"layouts":               {"cache", "tiers"},
	"query":                 {"merge", "partial", "router", "tiers"},
	"ingest":                {"params", "tiers"},
	"rollup":                {"merge", "partial", "query", "router", "tiers"},
	"demo":                  {"ingest", "tiers"},
	"flagconf":              {},
	"web":                   {},
	"api":                   {},
	"api/client":            {},
	"tiers/embedded":        {"tiers"},
	"tiers/cassandra":       {"merge", "tiers"},
	"tiers/storetest":       {"tiers"},
	"query/querytest":       {"ingest", "partial", "query", "rollup", "router", "tiers"},
	"httpapi":               {"api", "ingest", "layouts", "params", "partial", "query", "rollup", "router", "tiers", "web"},
	"httpapi/apitest":       {"api", "api/client", "cache", "httpapi", "ingest", "layouts", "partial", "query", "query/querytest", "router", "tiers"},
	"web/internal/preview":  {"demo", "httpapi", "ingest", "partial", "query", "rollup", "router", "tiers", "tiers/embedded"},
	"scripts/cassandra/cql": {},
	"layering":              {},
	"cmd/gateway":           {"cache", "demo", "flagconf", "httpapi", "ingest", "layouts", "params", "partial", "query", "rollup", "router", "sizing", "tiers", "tiers/cassandra", "tiers/embedded"},
	"integration":           {},
}

// restricted are outside imports only some packages may use.
var restricted = map[string][]string{
	"github.com/apache/cassandra-gocql-driver/v2": {"tiers/cassandra", "scripts/cassandra/cql", "integration"},
	"github.com/cockroachdb/pebble/v2":            {"tiers/embedded"},
	"github.com/go-chi/chi/v5":                    {"httpapi", "httpapi/apitest"},
	"github.com/getkin/kin-openapi":               {"api", "httpapi", "httpapi/apitest"},
	"net/http":                                    {"httpapi", "httpapi/apitest", "api", "api/client", "web", "web/internal/preview", "cmd/gateway"},
}

func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		ok, known := allowed[pkg]
		if !known {
			t.Errorf("package %s has no place in the layering; add it to allowed", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module+"/") {
				dep := strings.TrimPrefix(imp, module+"/")
				if !contains(ok, dep) {
					t.Errorf("%s imports %s, which the layering does not allow", pkg, dep)
				}
				continue
			}
			for prefix, who := range restricted {
				if (imp == prefix || strings.HasPrefix(imp, prefix+"/")) && !contains(who, pkg) {
					t.Errorf("%s imports %s; only %v may", pkg, imp, who)
				}
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
