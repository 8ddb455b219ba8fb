package responses

import (
	"container/list"
	"encoding/json"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/server/stream"
)

// Store keeps the responses created with store true, for
// previous_response_id and GET /v1/responses/{id}: in memory, bounded in
// count and in bytes, the least recently used going first. A server
// restart forgets them all; a client that needs a conversation to outlive
// one sends the whole input instead.
//
// Each response belongs to the tenant (auth.Tenant) whose request created
// it: another tenant's get, delete and previous_response_id find nothing,
// exactly as for an id never stored.
//
// Store is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	maxItems int
	maxBytes int
	bytes    int
	lru      *list.List // of *stored, most recently used at the front
	byID     map[string]*list.Element
}

// stored is one response: its JSON for retrieval and the conversation it
// ended, its own output last, for the next response to continue.
type stored struct {
	id     string
	tenant string
	body   []byte
	conv   []stream.ChatMessage
	size   int
}

// NewStore keeps at most maxItems responses within maxBytes.
func NewStore(maxItems, maxBytes int) *Store {
	return &Store{maxItems: maxItems, maxBytes: maxBytes, lru: list.New(), byID: map[string]*list.Element{}}
}

// keep stores a finished response (local or relayed) when asked to and
// returns its JSON.
func (s *Store) keep(resp *response, p *parsed) []byte {
	raw, _ := json.Marshal(resp) // strings, numbers and maps of strings always marshal
	if resp.Store {
		conv := append(slices.Clone(p.conv), resp.turn())
		s.put(resp.tenant, resp.ID, raw, conv)
	}
	return raw
}

// put stores tenant's response; one larger than the whole budget is not
// kept. Ids are random (stream.NewID), so two tenants never share one.
func (s *Store) put(tenant, id string, body []byte, conv []stream.ChatMessage) {
	size := len(id) + len(body)
	for _, m := range conv {
		size += len(m.Role) + len(m.Content) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			size += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	if size > s.maxBytes {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		s.remove(e)
	}
	s.byID[id] = s.lru.PushFront(&stored{id: id, tenant: tenant, body: body, conv: conv, size: size})
	s.bytes += size
	for s.lru.Len() > s.maxItems || s.bytes > s.maxBytes {
		s.remove(s.lru.Back())
	}
}

func (s *Store) remove(e *list.Element) {
	st := s.lru.Remove(e).(*stored)
	delete(s.byID, st.id)
	s.bytes -= st.size
}

// lookup is tenant's response id, nil when there is none; caller holds mu.
func (s *Store) lookup(tenant, id string) *list.Element {
	e, ok := s.byID[id]
	if !ok || e.Value.(*stored).tenant != tenant {
		return nil
	}
	return e
}

func (s *Store) get(tenant, id string) (*stored, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.lookup(tenant, id)
	if e == nil {
		return nil, false
	}
	s.lru.MoveToFront(e)
	return e.Value.(*stored), true
}

// history is what tenant's previous_response_id continues.
func (s *Store) history(tenant string) func(id string) ([]stream.ChatMessage, bool) {
	return func(id string) ([]stream.ChatMessage, bool) {
		st, ok := s.get(tenant, id)
		if !ok {
			return nil, false
		}
		return st.conv, true
	}
}

func (s *Store) delete(tenant, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.lookup(tenant, id)
	if e != nil {
		s.remove(e)
	}
	return e != nil
}

// Len is how many responses are kept.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}
