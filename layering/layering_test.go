package layering

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tsgate/tsgate"

// layers orders the module's packages from the centre outwards. A package
// may import packages of lower layers only: never one of its own layer
// (front ends do not call each other, services do not call each other
// sideways) and never one further out. A package missing here fails the
// test, so a new package has to take its place deliberately.
var layers = [][]string{
	// What went wrong, in kinds every front end renders (the one error
	// classification).
	{"failure"},
	// Rice codes over a bit stream, which sealed chunks and sketches
	// code their numbers with.
	{"ricecode"},
	// The quantile sketch rollup rows keep (DDSketch), under the storage
	// model that holds it.
	{"quantile"},
	// Foundation: the storage model, generic merging, JSON writing,
	// configuration syntax, the memory budget of answers, and embedded
	// assets (the contract, the dashboard) with the client generated from
	// the contract.
	{"tiers", "merge", "jsonenc", "flagconf", "api", "api/client", "web", "auth", "membudget"},
	// The sealed form of raw partitions (compressed chunks), which both
	// store adapters keep.
	{"tiers/sealed"},
	// The syntaxes of the API and the one error type for bad input.
	{"params"},
	// Cursors: signed positions of reads, checked positions of listings.
	{"cursor"},
	// Pure domain logic, and the store adapters.
	{"router", "partial", "sizing", "tiers/cassandra", "tiers/embedded"},
	// Reading tiers, caching, writing.
	{"scan", "cache", "ingest", "index"},
	// Answering reads, keeping rollups, demo data.
	{"query", "rollup", "demo", "layouts", "seal"},
	// The one table from kinds of failure to HTTP answers (problem+json).
	{"problem"},
	// Front ends: HTTP, and the Kafka consumer.
	{"httpapi", "grafana", "promapi", "kafkaingest"},
	// Assembly.
	{"gateway"},
	// Commands.
	{"cmd/gateway", "cmd/preview", "cmd/loadtest", "cmd/benchpeers"},
}

// support are test suites, test helpers and tools: they may import any
// package but commands, and no production package may import them.
var support = []string{
	"testkit/storetest", "testkit/querytest", "testkit/apitest", "testkit/promtest", "testkit/promoracle",
	"integration", "integration/cluster", "layering", "scripts/cassandra/cql",
}

// adapters import from the module only the storage model they implement
// (tiers), its sealed form (tiers/sealed) and the generic, dependency-free
// merge of ordered streams (the Cassandra registry merges its shards'
// listings with it), besides their driver.
var adapters = []string{"tiers/cassandra", "tiers/embedded"}

// adapterImports are the module's packages an adapter may import.
var adapterImports = []string{"tiers", "tiers/sealed", "merge"}

// pure packages do no I/O: everything they read or write comes through
// interfaces, so they are tested with fakes and never touch the network,
// the disk or the process.
var pure = []string{"failure", "ricecode", "quantile", "cursor", "index", "tiers", "tiers/sealed", "merge", "jsonenc", "params", "router", "partial", "scan", "query", "membudget"}

// ioPackages are the standard library's doors to the outside.
var ioPackages = []string{"os", "os/exec", "os/signal", "net", "net/http", "io/fs", "io/ioutil", "syscall", "path/filepath", "database/sql"}

// frontEnds translate their formats to and from the engine's types
// (query.Request, query.ManyRequest, their answers) and render errors by
// kind; engineInternals are what the engine does with a request, which
// no front end may reach around it for: planning, the fan-out, the
// scan, the caches, the stores.
var (
	frontEnds       = []string{"httpapi", "grafana", "promapi", "kafkaingest"}
	engineInternals = []string{"router", "partial", "scan", "cache", "tiers/cassandra", "tiers/embedded"}
)

// restricted are outside imports only some packages may use. The driver:
// the store adapter, and the tools and suites that prepare or measure a
// node themselves (cmd/benchpeers drops its keyspace and flushes it to
// count its bytes).
var restricted = map[string][]string{
	"github.com/apache/cassandra-gocql-driver/v2": {"tiers/cassandra", "scripts/cassandra/cql", "integration", "integration/cluster", "cmd/benchpeers"},
	"github.com/Shopify/toxiproxy/v2":             {"integration", "integration/cluster"},
	"github.com/cockroachdb/pebble/v2":            {"tiers/embedded"},
	"github.com/go-chi/chi/v5":                    {"httpapi", "grafana", "promapi", "testkit/apitest", "integration"},
	"github.com/getkin/kin-openapi":               {"api", "httpapi", "testkit/apitest"},
	"github.com/twmb/franz-go":                    {"kafkaingest", "integration"},
}

// Graph is the module's import graph: package (relative to the module) to
// the packages it imports, of the module and outside it.
type Graph map[string][]string

// Check returns every violation of the rules in g.
func Check(g Graph) []string {
	rank := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			rank[p] = i
		}
	}
	var out []string
	for pkg, imports := range g {
		_, layered := rank[pkg]
		isSupport := slices.Contains(support, pkg)
		if !layered && !isSupport {
			out = append(out, fmt.Sprintf("package %s has no place in the layering; add it to a layer", pkg))
			continue
		}
		for _, imp := range imports {
			dep, ours := strings.CutPrefix(imp, module+"/")
			if ours {
				switch {
				case strings.HasPrefix(dep, "cmd/"):
					out = append(out, fmt.Sprintf("%s imports the command %s; nothing imports a command", pkg, dep))
				case slices.Contains(support, dep) && !isSupport:
					out = append(out, fmt.Sprintf("%s imports the test support package %s", pkg, dep))
				case slices.Contains(adapters, pkg) && !slices.Contains(adapterImports, dep):
					out = append(out, fmt.Sprintf("the store adapter %s imports %s; adapters import only tiers, tiers/sealed, merge and their driver", pkg, dep))
				case slices.Contains(frontEnds, pkg) && slices.Contains(engineInternals, dep):
					out = append(out, fmt.Sprintf("the front end %s imports %s; front ends speak to the engine (query, index), never to its internals", pkg, dep))
				case layered && !slices.Contains(support, dep):
					if r, ok := rank[dep]; ok && r >= rank[pkg] {
						out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d); imports go inwards only", pkg, rank[pkg], dep, r))
					}
				}
				continue
			}
			if slices.Contains(pure, pkg) && slices.Contains(ioPackages, imp) {
				out = append(out, fmt.Sprintf("the pure package %s imports %s; it must do no I/O", pkg, imp))
			}
			for prefix, who := range restricted {
				if (imp == prefix || strings.HasPrefix(imp, prefix+"/")) && !slices.Contains(who, pkg) {
					out = append(out, fmt.Sprintf("%s imports %s; only %v may", pkg, imp, who))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// moduleGraph lists the module's packages with every build tag of the
// project set, so that the integration tests are checked too, and counts
// a package's test imports as its own.
func moduleGraph(t *testing.T) Graph {
	t.Helper()
	out, err := exec.Command("go", "list", "-tags", "integration,cluster", "-json=ImportPath,Imports,TestImports,XTestImports", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := Graph{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		imports := p.Imports
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			// Tests may use test support and the packages around them;
			// what a test may not do is import a command or a driver it
			// has no business with.
			dep, ours := strings.CutPrefix(imp, module+"/")
			if ours && !strings.HasPrefix(dep, "cmd/") {
				continue
			}
			imports = append(imports, imp)
		}
		g[pkg] = imports
	}
	return g
}

func TestDependencyDirection(t *testing.T) {
	g := moduleGraph(t)
	if len(g) < 20 || g["integration"] == nil {
		t.Fatalf("go list found %d packages, integration with %d imports: the graph is not the module's", len(g), len(g["integration"]))
	}
	for _, v := range Check(g) {
		t.Error(v)
	}
}

// TestCheckCatchesBackEdges adds edges that break each rule to the real
// graph and checks that every one is reported: the rules are not a list of
// today's imports that would approve whatever exists.
func TestCheckCatchesBackEdges(t *testing.T) {
	for _, c := range []struct {
		from, to string
		want     string
	}{
		{"tiers", module + "/query", "imports go inwards only"},
		{"router", module + "/scan", "imports go inwards only"},
		{"query", module + "/rollup", "imports go inwards only"},
		{"grafana", module + "/httpapi", "imports go inwards only"},
		{"httpapi", module + "/gateway", "imports go inwards only"},
		{"tiers/embedded", module + "/params", "adapters import only tiers"},
		{"tiers/cassandra", module + "/query", "adapters import only tiers"},
		{"gateway", module + "/cmd/gateway", "nothing imports a command"},
		{"integration", module + "/cmd/gateway", "nothing imports a command"},
		{"query", module + "/testkit/querytest", "test support package"},
		{"httpapi", module + "/router", "front ends speak to the engine"},
		{"promapi", module + "/partial", "front ends speak to the engine"},
		{"grafana", module + "/tiers/embedded", "front ends speak to the engine"},
		{"router", "os", "must do no I/O"},
		{"query", "net/http", "must do no I/O"},
		{"rollup", "github.com/apache/cassandra-gocql-driver/v2", "only"},
		{"query", "github.com/cockroachdb/pebble/v2/vfs", "only"},
		{"newpkg", "fmt", "has no place in the layering"},
	} {
		g := moduleGraph(t)
		g[c.from] = append(slices.Clone(g[c.from]), c.to)
		var found bool
		for _, v := range Check(g) {
			if strings.Contains(v, c.from) && strings.Contains(v, c.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("an import of %s by %s was not reported (%q)", c.to, c.from, c.want)
		}
	}
}

// TestArchitectureNamesEveryPackage keeps docs/architecture.md and the
// layering together: every package of a layer is named in the document
// (as `name` or in its layer diagram), so that neither can drift.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, layer := range layers {
		for _, pkg := range layer {
			if !strings.Contains(text, pkg) {
				t.Errorf("docs/architecture.md does not name the package %s", pkg)
			}
		}
	}
	for _, pkg := range support {
		if !strings.Contains(text, pkg) {
			t.Errorf("docs/architecture.md does not name the test support %s", pkg)
		}
	}
}
