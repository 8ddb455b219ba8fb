package wirefields

import (
	"encoding/json"
	"slices"
	"strings"
)

// Sample is the value a parser's field-walk test gives one field: Value
// must change the parsed request, or, written "!" + value, be refused
// naming the field; Needs are other members the value takes effect with,
// put in both bodies.
type Sample struct{ Value, Needs string }

// WalkCase is one field of the walk: the same body parsed Without the
// field and With Value set, and whether the parser must refuse it.
type WalkCase struct {
	Name, Value   string
	Refused       bool
	Without, With []byte
}

// Walk lays out the walk over known's fields that are not api's Hints,
// in name order: base is the members of a minimal valid body. A field
// with no sample is returned in missing, for the test to report: a field
// added to the wire struct must come with a sample or a Hint.
func Walk(api API, known map[string]bool, samples map[string]Sample, base string) (cases []WalkCase, missing []string) {
	for name := range known {
		if IsHint(api, name) {
			continue
		}
		s, ok := samples[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		members := base
		if s.Needs != "" {
			members += "," + s.Needs
		}
		without := "{" + members + "}"
		value, refused := strings.CutPrefix(s.Value, "!")
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(without), &m); err != nil {
			panic("wirefields.Walk: base and needs of " + name + " are not JSON members: " + err.Error())
		}
		m[name] = json.RawMessage(value)
		with, err := json.Marshal(m)
		if err != nil {
			panic("wirefields.Walk: sample of " + name + " is not JSON: " + err.Error())
		}
		cases = append(cases, WalkCase{Name: name, Value: value, Refused: refused, Without: []byte(without), With: with})
	}
	slices.SortFunc(cases, func(a, b WalkCase) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(missing)
	return cases, missing
}
