/*
Copyright 2026 The projection-recovery Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package source

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// decodePage decodes a page body into pageBody: decodePageFast when it
// accepts the body, encoding/json otherwise. Either way the result is what
// json.Unmarshal gives (or its error).
func decodePage(body []byte) (pageBody, error) {
	if b, ok := decodePageFast(body); ok {
		return b, nil
	}
	var b pageBody
	err := json.Unmarshal(body, &b)
	return b, err
}

// decodePageFast decodes the plain JSON a member sends for a page in one
// pass, without reflection, and every event's wire into one buffer: through
// encoding/json that was the manager's largest CPU cost in a catch-up
// (docs/performance.md, "What the manager does for speed").
//
// It accepts the body only when json.Unmarshal into pageBody would succeed
// with the same value, and declines (false) everything else, which the
// caller then hands to encoding/json: errors, and every unusual but valid
// spelling, stay encoding/json's. What it accepts: docs/design/decoding.md,
// "Pages". FuzzDecodePageFast checks the equivalence against json.Unmarshal.
func decodePageFast(b []byte) (pageBody, bool) {
	p := pageParser{b: b}
	var out pageBody
	var seen [9]bool
	p.ws()
	if !p.byte('{') {
		return pageBody{}, false
	}
	p.ws()
	if p.peek() == '}' {
		p.i++
	} else {
		for {
			k, ok := p.str()
			if !ok || !p.colon() {
				return pageBody{}, false
			}
			f := pageField(k)
			if f < 0 || seen[f] {
				return pageBody{}, false
			}
			seen[f] = true
			switch f {
			case 0:
				v, ok := p.int()
				if !ok {
					return pageBody{}, false
				}
				n := int(v)
				out.ProtocolVersion = &n
			case 1, 6, 7:
				s, ok := p.str()
				if !ok {
					return pageBody{}, false
				}
				v := string(s)
				switch f {
				case 1:
					out.DescriptorHash = &v
				case 6:
					out.DigestAfter = &v
				default:
					out.DigestThrough = &v
				}
			case 2, 3, 4:
				v, ok := p.int()
				if !ok {
					return pageBody{}, false
				}
				switch f {
				case 2:
					out.BoundarySeq = &v
				case 3:
					out.AfterSeq = &v
				default:
					out.ThroughSeq = &v
				}
			case 5:
				v, ok := p.bool()
				if !ok {
					return pageBody{}, false
				}
				out.Idle = &v
			case 8:
				items, ok := p.events()
				if !ok {
					return pageBody{}, false
				}
				out.Events = &items
			}
			p.ws()
			if p.byte(',') {
				p.ws()
				continue
			}
			if !p.byte('}') {
				return pageBody{}, false
			}
			break
		}
	}
	p.ws()
	if p.i != len(p.b) {
		return pageBody{}, false
	}
	return out, true
}

// pageField is the index of a pageBody key spelled exactly as its tag, -1
// for any other.
func pageField(k []byte) int {
	switch string(k) {
	case "protocolVersion":
		return 0
	case "descriptorHash":
		return 1
	case "boundarySeq":
		return 2
	case "afterSeq":
		return 3
	case "throughSeq":
		return 4
	case "idle":
		return 5
	case "digestAfter":
		return 6
	case "digestThrough":
		return 7
	case "events":
		return 8
	}
	return -1
}

type pageParser struct {
	b []byte
	i int
}

func (p *pageParser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *pageParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *pageParser) byte(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

func (p *pageParser) colon() bool {
	p.ws()
	ok := p.byte(':')
	p.ws()
	return ok
}

// str reads a string of printable ASCII without escapes; its raw bytes (a
// subslice of the body) are its value.
func (p *pageParser) str() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	from := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[from:p.i]
			p.i++
			return s, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// int reads -?(0|[1-9][0-9]*) not followed by a fraction or an exponent.
func (p *pageParser) int() (int64, bool) {
	from := p.i
	p.byte('-')
	switch c := p.peek(); {
	case c == '0':
		p.i++
	case c >= '1' && c <= '9':
		for c := p.peek(); c >= '0' && c <= '9'; c = p.peek() {
			p.i++
		}
	default:
		return 0, false
	}
	if c := p.peek(); c == '.' || c == 'e' || c == 'E' || (c >= '0' && c <= '9') {
		return 0, false
	}
	v, err := strconv.ParseInt(string(p.b[from:p.i]), 10, 64)
	return v, err == nil
}

func (p *pageParser) bool() (bool, bool) {
	for _, lit := range []struct {
		s string
		v bool
	}{{"true", true}, {"false", false}} {
		if len(p.b)-p.i >= len(lit.s) && string(p.b[p.i:p.i+len(lit.s)]) == lit.s {
			p.i += len(lit.s)
			return lit.v, true
		}
	}
	return false, false
}

// events reads the events array. Every wire is decoded into one buffer
// (sized for the whole body, which holds every wire's base64), each item's
// slice capped at its own length so that appending to one cannot overwrite
// the next.
func (p *pageParser) events() ([]pageItem, bool) {
	if !p.byte('[') {
		return nil, false
	}
	items := make([]pageItem, 0, 64)
	buf := make([]byte, base64.StdEncoding.DecodedLen(len(p.b)-p.i))
	used := 0
	var seqs []int64 // the items' seqs, in chunks (one allocation per chunk, not per item)
	p.ws()
	if p.byte(']') {
		return items, true
	}
	for {
		if !p.byte('{') {
			return nil, false
		}
		var it pageItem
		var seq int64
		var haveSeq, haveWire bool
		var ok bool
		for k := 0; k < 2; k++ {
			p.ws()
			var key []byte
			if key, ok = p.str(); !ok || !p.colon() {
				return nil, false
			}
			switch {
			case string(key) == "seq" && !haveSeq:
				if seq, ok = p.int(); !ok {
					return nil, false
				}
				haveSeq = true
			case string(key) == "wire" && !haveWire:
				s, ok := p.str()
				if !ok {
					return nil, false
				}
				n, err := base64.StdEncoding.Decode(buf[used:], s)
				if err != nil {
					return nil, false
				}
				it.Wire = buf[used : used+n : used+n]
				used += n
				haveWire = true
			default:
				return nil, false
			}
			p.ws()
			if k == 0 && !p.byte(',') {
				return nil, false
			}
		}
		if !p.byte('}') {
			return nil, false
		}
		if len(seqs) == cap(seqs) {
			seqs = make([]int64, 0, 256)
		}
		seqs = append(seqs, seq)
		it.Seq = &seqs[len(seqs)-1]
		items = append(items, it)
		p.ws()
		if p.byte(']') {
			return items, true
		}
		if !p.byte(',') {
			return nil, false
		}
		p.ws()
	}
}
