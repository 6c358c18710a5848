package client_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tsgate/tsgate/api/client"
)

// The committed client is what the generator makes of the committed
// document: regenerate it (make generate) after changing either.
func TestGeneratedCodeIsUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the generator")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to regenerate the client: %v", err)
	}
	// The same configuration, writing elsewhere.
	dir := t.TempDir()
	out := filepath.Join(dir, "client.gen.go")
	cfg, err := os.ReadFile("oapi-codegen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("\noutput: client.gen.go\n"), []byte("\noutput: "+out+"\n"), 1)
	if !bytes.Contains(cfg, []byte(out)) {
		t.Fatal("oapi-codegen.yaml no longer says output: client.gen.go")
	}
	if err := os.WriteFile(filepath.Join(dir, "oapi-codegen.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "tool", "oapi-codegen", "-config", filepath.Join(dir, "oapi-codegen.yaml"), "../openapi.yaml")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("client.gen.go is not what api/openapi.yaml generates: run make generate")
	}
}

func TestTypesParseAnswers(t *testing.T) {
	t.Run("points", func(t *testing.T) {
		var a client.PointsAnswer
		body := `{"series":"s","from":1768435200000,"to":1768478400000,"tier":"minute","resolution_ms":300000,"order":"asc",
			"columns":["t","sum","count","avg"],"segments":[{"from":1768435200000,"to":1768478400000,"tier":"minute"}],
			"points":[[1768435200000,42,3,14],[1768435500000,-1.5e-7,2,null]],
			"partial":true,"partial_reason":"slo","covered":[1768435200000,1768435800000],"next_cursor":"abc",
			"stats":{"buckets":1,"partitions":2,"rows_read":5,"cache_hits":0,"elapsed_ms":1.25}}`
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			t.Fatal(err)
		}
		if len(a.Points) != 2 || a.Points[0][0] != 1768435200000 || a.Points[0][1] != 42 || a.Points[1][1] != -1.5e-7 || !math.IsNaN(a.Points[1][3]) {
			t.Fatalf("points %v", a.Points)
		}
		if a.Tier != client.Tier("minute") || a.Columns[3] != client.ColumnAvg || !a.Partial || *a.PartialReason != client.PointsAnswerPartialReasonSLO ||
			*a.NextCursor != "abc" || a.Covered[1] != 1768435800000 || a.Stats.ElapsedMs != 1.25 {
			t.Fatalf("answer %+v", a)
		}
		again, err := json.Marshal(a.Points)
		if err != nil || string(again) != `[[1768435200000,42,3,14],[1768435500000,-1.5e-7,2,null]]` {
			t.Fatalf("points marshal back to %s, %v", again, err)
		}
	})
	t.Run("batch", func(t *testing.T) {
		var b client.BatchAnswer
		body := `{"results":[
			{"series":"a","from":1,"to":2,"tier":"raw","resolution_ms":0,"order":"desc","columns":["t","v"],"segments":[],
			 "points":[[1,2]],"partial":false,"covered":[1,2],"stats":{"buckets":1,"partitions":1,"rows_read":1,"cache_hits":0,"elapsed_ms":0.1}},
			{"series":"b","error":{"type":"/docs#problem/series-not-found","title":"Series not found","status":404,"detail":"no series has this id"}}]}`
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			t.Fatal(err)
		}
		if len(b.Results) != 2 || b.Results[0].Error != nil || b.Results[0].Points[0][1] != 2 || b.Results[0].Order != client.OrderDesc {
			t.Fatalf("first result %+v", b.Results[0])
		}
		if e := b.Results[1].Error; e == nil || b.Results[1].Series != "b" || e.Status != 404 || e.Type != client.ProblemTypeSeriesNotFound {
			t.Fatalf("second result %+v", b.Results[1])
		}
	})
	t.Run("problem", func(t *testing.T) {
		var p client.Problem
		body := `{"type":"/docs#problem/invalid-parameter","title":"Invalid parameter","status":400,"detail":"limit: must be an integer from 1 to 100000",
			"errors":[{"param":"limit","message":"must be an integer from 1 to 100000"}]}`
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		if p.Type != client.ProblemTypeInvalidParameter || p.Errors == nil || (*p.Errors)[0].Param != "limit" {
			t.Fatalf("problem %+v", p)
		}
	})
}
