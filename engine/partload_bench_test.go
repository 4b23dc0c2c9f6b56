package engine

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// benchPartImage is a part of n records shaped as a crash loop's store
// holds them: documents' raw keys and receipts' packed ones, each value a
// compact value-log pointer.
func benchPartImage(tb testing.TB, n int) ([]byte, partMeta) {
	var buf bytes.Buffer
	w := newPartWriter(&buf, 1, 0, store.Version(n+1), nil)
	for i := range n {
		key := fmt.Appendf(nil, "t/%012d/doc", i)
		if i%11 == 0 {
			key = fmt.Appendf(nil, "t/%012d/%032x", i, i)
		}
		ptr := vlogPtr{seg: uint32(1 + i/100_000), off: uint32(i * 600 % (60 << 20)), n: 450}.encode(nil)
		w.add(index.Probe(key), ptr, uint64(i+1), true)
	}
	if err := w.finish(nil, true); err != nil {
		tb.Fatal(err)
	}
	data := buf.Bytes()
	m, err := partMetaOf(data[:min(len(data), 1024)], data[max(0, len(data)-1024):], int64(len(data)))
	if err != nil {
		tb.Fatal(err)
	}
	return data, m
}

// BenchmarkLoadPart is an open's work per base record, the file's pages
// and the items' array already touched: CRC, items and tally, by the full
// decode (decodePart, every record's order and the tally block proven)
// and by an open's load (loadPartItems, on the CRC's word), of a part
// with its tally block and of one without (IDEMCKP6), summed record by
// record.
func BenchmarkLoadPart(b *testing.B) {
	const n = 1 << 18
	data, m := benchPartImage(b, n)
	dst := make([]index.KV, n)
	b.Run("decoded", func(b *testing.B) {
		for b.Loop() {
			var t itemTally
			i := 0
			err := decodePart(data, m, func(k index.KV, v []byte, ver store.Version, indirect bool) {
				dst[i] = loadedKV(k, v, ver, indirect)
				t.add(dst[i])
				i++
			})
			if err != nil || i != n {
				b.Fatal(err, i)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
	})
	old, om := withTally(b, data, m, nil)
	for _, c := range []struct {
		name string
		data []byte
		m    partMeta
	}{{"loaded", data, m}, {"loaded-summing-records", old, om}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				var t itemTally
				if err := loadPartItems(c.data, c.m, dst, &t); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
		})
	}
}
