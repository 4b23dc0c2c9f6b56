package table

import (
	"strconv"
	"strings"
	"testing"

	"github.com/idemdb/idem/internal/testsupport"
)

// benchBody is the batch route's body cmd/bench sends: ten inserts of a
// payment-like document of about 190 bytes.
func benchBody() []byte {
	doc := `{"amount":4200,"currency":"usd","customer":"cus_4f3a2b1c9d","status":"succeeded","description":"` + strings.Repeat("x", 88) + `"}`
	var sb strings.Builder
	sb.WriteString(`{"inserts":[`)
	for j := range 10 {
		if j > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"id":"doc-` + strconv.Itoa(j) + `","doc":` + doc + `}`)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// BenchmarkDecodeValidate is the per-request CPU of a batch body before any
// store access: decode, validate, canonical form.
func BenchmarkDecodeValidate(b *testing.B) {
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	testsupport.ReportCPU(b)
	for range b.N {
		batch, err := DecodeBatch(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := batch.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateBuilt is Validate of a batch a host built in Go (not
// decoded from a body), whose documents it canonicalizes itself.
func BenchmarkValidateBuilt(b *testing.B) {
	decoded, err := DecodeBatch(benchBody())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	testsupport.ReportCPU(b)
	for range b.N {
		batch := &Batch{Inserts: make([]Insert, len(decoded.Inserts))}
		copy(batch.Inserts, decoded.Inserts)
		if err := batch.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode is DecodeBatch alone: what the batch route spends on a
// body before the service sees it.
func BenchmarkDecode(b *testing.B) {
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	testsupport.ReportCPU(b)
	for range b.N {
		if _, err := DecodeBatch(body); err != nil {
			b.Fatal(err)
		}
	}
}
