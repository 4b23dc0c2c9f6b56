// Package canonjson is idem's JSON: a strict parser that writes the
// canonical form of its input in the same pass (Append), a decoder of
// bodies of a known shape built on it (Decoder), the number literal scanner
// behind the number limits (ScanNumber), and the encoding/json round trip
// transforms compute on (Decode, Marshal).
//
// Canonical bytes are what request fingerprints are computed from and what
// documents are stored as. A receipt stored today is matched against its
// retry tomorrow by those bytes, so everything below is a compatibility
// promise: changing any of it changes fingerprints of stored receipts.
//
// # Accepted input
//
// One JSON value (RFC 8259), optionally surrounded by whitespace; anything
// after it is refused. On top of RFC 8259 this package refuses:
//
//   - duplicate object keys, compared after decoding escapes ("a" and
//     "\u0061" are the same key). RFC 8259 says names SHOULD be unique;
//     accepting repeats would make "the same request" ambiguous.
//   - \u escapes of a lone UTF-16 surrogate: only a high-low pair encodes a
//     character. encoding/json reads a lone one as U+FFFD, which would make
//     "\ud800" and "\udc00" one request.
//   - invalid UTF-8 anywhere in a string (encoding/json would substitute
//     U+FFFD, with the same consequence), and unescaped control characters.
//   - nesting deeper than DepthMax ({} and [] are one level each).
//   - number literals with more than NumberDigitsMax digits before the
//     exponent (leading zeros included) or an exponent beyond
//     ±NumberExponentMax. A literal beyond them does not stop the parse: a
//     syntax error anywhere in the input wins, and Decoder only records the
//     first one (Decoder.LimitErr) so that bodies stored before the limits
//     existed stay readable.
//
// Refusals are *syntaxError with the offset of the problem, or errDepth;
// their messages are part of API answers and do not change.
//
// # Canonical form
//
//   - no insignificant whitespace;
//   - object members sorted by the bytes of their decoded keys;
//   - numbers exactly as written (1.0, 1e0 and -0 stay themselves);
//   - strings re-encoded as encoding/json encodes them with HTML escaping
//     off: \" \\ \b \f \n \r \t, \u00XX for other control characters,
//     \u2028 and \u2029 escaped, every other character as UTF-8 (so \/ is
//     /, and \u00e9 is é);
//   - true, false and null as themselves.
//
// It is idempotent (the canonical form of a canonical form is itself), and
// it is exactly encoding/json's decode (numbers as json.Number) and
// re-encode (sorted keys, no HTML escaping): Append(nil, x) equals
// Marshal(Decode(x)) for every x Append accepts. The differential tests
// and fuzz target in this package hold it to both.
package canonjson
