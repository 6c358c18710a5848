package kafkaingest

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Headers a dead letter carries besides the original record's, in the
// manner of Kafka Connect's dead-letter queues: the value and key are the
// original bytes, so that a corrected producer, or an operator, can send
// them again.
const (
	headerReason    = "tsgate.dead-letter.reason"
	headerKind      = "tsgate.dead-letter.kind"
	headerErrors    = "tsgate.dead-letter.errors"
	headerTopic     = "tsgate.dead-letter.topic"
	headerPartition = "tsgate.dead-letter.partition"
	headerOffset    = "tsgate.dead-letter.offset"
	headerTimestamp = "tsgate.dead-letter.timestamp"
)

// deadLetterRecord is what goes to the dead-letter topic for rec.
func deadLetterRecord(topic string, rec *kgo.Record, why Refusal) *kgo.Record {
	headers := make([]kgo.RecordHeader, 0, len(rec.Headers)+7)
	headers = append(headers, rec.Headers...)
	headers = append(headers,
		kgo.RecordHeader{Key: headerReason, Value: []byte(why.Reason)},
		kgo.RecordHeader{Key: headerKind, Value: []byte(why.Kind)},
		kgo.RecordHeader{Key: headerTopic, Value: []byte(rec.Topic)},
		kgo.RecordHeader{Key: headerPartition, Value: []byte(strconv.FormatInt(int64(rec.Partition), 10))},
		kgo.RecordHeader{Key: headerOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
	)
	if !rec.Timestamp.IsZero() {
		headers = append(headers, kgo.RecordHeader{Key: headerTimestamp, Value: []byte(strconv.FormatInt(rec.Timestamp.UnixMilli(), 10))})
	}
	if len(why.Errors) > 0 {
		type entry struct {
			Param   string `json:"param"`
			Message string `json:"message"`
		}
		entries := make([]entry, len(why.Errors))
		for i, e := range why.Errors {
			entries[i] = entry{e.Param, e.Message}
		}
		js, _ := json.Marshal(entries)
		headers = append(headers, kgo.RecordHeader{Key: headerErrors, Value: js})
	}
	return &kgo.Record{Topic: topic, Key: rec.Key, Value: rec.Value, Headers: headers}
}

// producer sends dead letters with the consumer's client.
type producer struct {
	client *kgo.Client
	topic  string
}

func (p producer) Send(ctx context.Context, rec *kgo.Record, why Refusal) error {
	return p.client.ProduceSync(ctx, deadLetterRecord(p.topic, rec, why)).FirstErr()
}
