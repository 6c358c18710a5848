package kafkaingest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/flagconf"
)

// Every flag can come from the YAML file and the environment, as every
// other flag of gateway serve.
func TestConfigFromFileAndEnvironment(t *testing.T) {
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := "kafka:\n  brokers: [k1:9092, k2:9092]\n  topic: points\n  sasl:\n    mechanism: SCRAM-SHA-512\n    username: gw\n  retry-max: 2s\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.String("config", "", "")
	c.RegisterFlags(fs)
	env := map[string]string{"GATEWAY_KAFKA_SASL_PASSWORD": "secret", "GATEWAY_KAFKA_GROUP": "ingest"}
	err := flagconf.Parse(fs, []string{"--config", file, "--kafka-batch-points", "500"}, "GATEWAY_", "config",
		func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Brokers, ",") != "k1:9092,k2:9092" || c.Topic != "points" || c.Group != "ingest" ||
		c.SASL.Mechanism != "SCRAM-SHA-512" || c.SASL.Username != "gw" || c.SASL.Password != "secret" ||
		c.RetryMax != 2*time.Second || c.BatchPoints != 500 || c.deadLetterTopic() != "points.dead-letter" {
		t.Fatalf("config %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.connOpts(); err != nil {
		t.Fatal(err)
	}
}

// Validate names the flag of every setting that cannot work.
func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("no brokers (no consumer): %v", err)
	}
	c := DefaultConfig()
	c.Brokers = []string{"nohost"}
	c.Topic = "bad topic"
	c.Start = "middle"
	c.SASL.Mechanism = "GSSAPI"
	c.TLS.CAFile = "/ca.pem"
	c.TLS.CertFile = "/cert.pem"
	err := c.Validate()
	for _, want := range []string{"--kafka-brokers", "--kafka-topic", "--kafka-start", "--kafka-sasl-mechanism", "need --kafka-tls", "--kafka-tls-cert and --kafka-tls-key"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %s", err, want)
		}
	}
	c = DefaultConfig()
	c.Brokers, c.Topic, c.DeadLetterTopic = []string{"k:9092"}, "p", "p"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "must differ") {
		t.Errorf("dead-letter topic = topic: %v", err)
	}
	c = DefaultConfig()
	c.Brokers, c.Topic, c.TLS.Enabled, c.TLS.CAFile = []string{"k:9092"}, "p", true, filepath.Join(t.TempDir(), "missing.pem")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(c, Deps{}); err == nil || !strings.Contains(err.Error(), "--kafka-tls-ca") {
		t.Errorf("a missing CA file: %v", err)
	}
}
