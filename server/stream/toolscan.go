package stream

import "strings"

// scanner reads one call block's body byte by byte (see ToolParser):
//
//	Hermes   ws* object ws* "</tool_call>"
//	Mistral  ws* "[" ws* object (ws* "," ws* object)* ws* "]"
//	Llama 3  ws* object (ws* ";" ws* object)*      (ends at the first other byte)
//	object   "{" members "}" with "name": string and "arguments" (or
//	         "parameters"): any JSON value, in either order; other members skipped
type scanner struct {
	format ToolFormat
	st     scanState
	value  valueScan // the member value being read
	key    strings.Builder
	keyRaw bool // key is being read
	member memberKind
	closer int // Hermes: bytes of the closer matched
	tail   string

	objects    int     // objects completed in this block
	name       *string // of the current object, once read
	nameRaw    strings.Builder
	sentName   bool
	args       strings.Builder // argument bytes not yet sent
	argsSeen   bool
	argsStr    bool // the arguments are a JSON string (decoded at its end)
	argsDone   bool
	objectDone bool // set when an object ended; the parser clears it
}

type scanState uint8

const (
	sBlock  scanState = iota // before the first object (or Mistral's "[")
	sList                    // Mistral: after "[" or ",", before an object
	sMember                  // after "{" or ",": a key or "}"
	sKey                     // inside a key
	sColon                   // after a key
	sValue                   // after ":", before the value
	sIn                      // inside a value
	sNext                    // after a value: "," or "}"
	sAfter                   // after an object
	sCloser                  // Hermes: inside "</tool_call>"
)

type memberKind uint8

const (
	memberOther memberKind = iota
	memberName
	memberArgs
)

type stepResult uint8

const (
	stepOK  stepResult = iota
	stepBad            // the byte does not fit
	stepEnd            // the block ended with this byte
)

func (s *scanner) nothingSent() bool { return !s.sentName && s.objects == 0 }

// complete: the block holds whole calls only, so it may end here.
func (s *scanner) complete() bool {
	return s.objects > 0 && (s.st == sAfter || s.st == sCloser || s.st == sList)
}

// argsReady: the pending argument bytes may be sent (a JSON-string form is
// sent only once decoded).
func (s *scanner) argsReady() bool { return !s.argsStr || s.argsDone }

func (s *scanner) nextObject() {
	s.name, s.sentName, s.argsSeen, s.argsStr, s.argsDone = nil, false, false, false, false
	s.nameRaw.Reset()
	s.args.Reset()
}

func (s *scanner) step(c byte) stepResult {
	switch s.st {
	case sBlock:
		switch {
		case isSpace(c):
		case c == '[' && s.format == ToolsMistral:
			s.st = sList
		case c == '{' && s.format != ToolsMistral:
			s.st = sMember
		default:
			return stepBad
		}
	case sList:
		switch {
		case isSpace(c):
			s.tail += string(c)
		case c == '{':
			s.st, s.tail = sMember, ""
		case c == ']' && s.format == ToolsMistral:
			return stepEnd
		default:
			return stepBad
		}
	case sMember:
		switch {
		case isSpace(c):
		case c == '"':
			s.st = sKey
			s.key.Reset()
			s.key.WriteByte(c)
		case c == '}':
			return s.endObject()
		default:
			return stepBad
		}
	case sKey:
		s.key.WriteByte(c)
		if c == '"' && !escaped(s.key.String()) {
			s.st = sColon
		}
	case sColon:
		switch {
		case isSpace(c):
		case c == ':':
			s.st = sValue
			s.member = memberOther
			if k, ok := decodeString(s.key.String()); ok {
				switch {
				case k == "name" && s.name == nil:
					s.member = memberName
				case (k == "arguments" || k == "parameters") && !s.argsSeen:
					s.member = memberArgs
				}
			}
		default:
			return stepBad
		}
	case sValue:
		if isSpace(c) {
			return stepOK
		}
		s.value = valueScan{}
		if s.member == memberName && c != '"' {
			return stepBad // a name must be a string
		}
		if s.member == memberArgs {
			s.argsSeen, s.argsStr = true, c == '"'
		}
		s.st = sIn
		return s.inValue(c)
	case sIn:
		return s.inValue(c)
	case sNext:
		switch {
		case isSpace(c):
		case c == ',':
			s.st = sMember
		case c == '}':
			return s.endObject()
		default:
			return stepBad
		}
	case sAfter:
		switch {
		case isSpace(c):
			s.tail += string(c)
		case s.format == ToolsHermes && c == hermesCloser[0]:
			s.st, s.closer = sCloser, 1
			s.tail += string(c)
		case s.format == ToolsMistral && c == ',', s.format == ToolsLlama3 && c == ';':
			s.st = sList
			s.tail += string(c)
		case s.format == ToolsMistral && c == ']':
			return stepEnd
		default:
			return stepBad
		}
	case sCloser:
		if c != hermesCloser[s.closer] {
			return stepBad
		}
		s.closer++
		s.tail += string(c)
		if s.closer == len(hermesCloser) {
			return stepEnd
		}
	}
	return stepOK
}

// inValue feeds c to the member value; a scalar ends at the first byte
// after it, which is then read as what follows the value.
func (s *scanner) inValue(c byte) stepResult {
	switch s.value.feed(c) {
	case valueMore:
		s.keep(c)
		return stepOK
	case valueDone:
		s.keep(c)
		s.endValue()
		return stepOK
	case valueAfter:
		s.endValue()
		s.st = sNext
		return s.step(c)
	}
	return stepBad
}

func (s *scanner) keep(c byte) {
	switch s.member {
	case memberName:
		s.nameRaw.WriteByte(c)
	case memberArgs:
		s.args.WriteByte(c)
	}
}

func (s *scanner) endValue() {
	s.st = sNext
	switch s.member {
	case memberName:
		if n, ok := decodeString(s.nameRaw.String()); ok && n != "" { // no function is called ""
			s.name = &n
		}
	case memberArgs:
		if s.argsStr {
			dec, _ := decodeString(s.args.String()) // a complete string literal decodes
			s.args.Reset()
			s.args.WriteString(dec)
			s.argsDone = true
		}
	}
}

func (s *scanner) endObject() stepResult {
	if s.name == nil {
		return stepBad
	}
	if !s.argsSeen {
		s.args.WriteString("{}") // a call without arguments takes none
		s.argsSeen = true
	}
	s.objects++
	s.objectDone = true
	s.st, s.tail = sAfter, ""
	return stepOK
}

// escaped reports whether the closing quote of raw (its last byte) is
// escaped by an odd run of backslashes before it.
func escaped(raw string) bool {
	n := 0
	for i := len(raw) - 2; i >= 1 && raw[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// valueScan delimits one JSON value without interpreting it.
type valueScan struct {
	started, inStr, esc, scalar bool
	depth                       int
}

type valueStep uint8

const (
	valueMore  valueStep = iota // c belongs to the value, which goes on
	valueDone                   // c ends the value
	valueAfter                  // the value ended before c
	valueBad
)

func (v *valueScan) feed(c byte) valueStep {
	if !v.started {
		v.started = true
		switch {
		case c == '"':
			v.inStr = true
		case c == '{' || c == '[':
			v.depth = 1
		case isScalarByte(c):
			v.scalar = true
		default:
			return valueBad
		}
		return valueMore
	}
	if v.inStr {
		switch {
		case v.esc:
			v.esc = false
		case c == '\\':
			v.esc = true
		case c == '"':
			v.inStr = false
			if v.depth == 0 {
				return valueDone
			}
		case c < 0x20:
			return valueBad // JSON strings hold no raw control characters
		}
		return valueMore
	}
	if v.scalar {
		if isScalarByte(c) {
			return valueMore
		}
		return valueAfter
	}
	switch c {
	case '"':
		v.inStr = true
	case '{', '[':
		v.depth++
	case '}', ']':
		v.depth--
		if v.depth == 0 {
			return valueDone
		}
	}
	return valueMore
}

func isScalarByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '+' || c == '.'
}
