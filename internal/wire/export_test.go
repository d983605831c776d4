package wire

// Hooks for the external tests (decode_fast_test.go), which import the engine
// to seed realistic events and so cannot live in package wire.
var (
	DecodeReference = decodeReference
	DecodeFast      = decodeFast
)
