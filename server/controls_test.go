package server

import "testing"

// TestControlParams: logit_bias keys are token ids and values within ±100,
// min_tokens within max_tokens; stop_token_ids become the engine's stop ids.
func TestControlParams(t *testing.T) {
	g, err := parseRequest([]byte(`{"prompt":"x","max_tokens":8,"logit_bias":{"5":-100,"7":2.5},"min_tokens":3,"ignore_eos":true,"stop_token_ids":[9,10]}`), false)
	if err != nil || g.LogitBias[5] != -100 || g.LogitBias[7] != 2.5 || len(g.LogitBias) != 2 || g.MinTokens != 3 || !g.IgnoreEOS ||
		len(g.StopTokens) != 2 || g.StopTokens[1] != 10 {
		t.Fatalf("%+v %v", g, err)
	}
	for body, param := range map[string]string{
		`{"prompt":"x","logit_bias":{"a":1}}`:          "logit_bias",
		`{"prompt":"x","logit_bias":{"5":101}}`:        "logit_bias",
		`{"prompt":"x","logit_bias":{"-3":1}}`:         "logit_bias",
		`{"prompt":"x","max_tokens":2,"min_tokens":3}`: "min_tokens",
		`{"prompt":"x","min_tokens":-1}`:               "min_tokens",
		`{"prompt":"x","stop_token_ids":"x"}`:          "stop_token_ids",
	} {
		_, err := parseRequest([]byte(body), false)
		if err == nil || toAPIError(err).Param == nil || *toAPIError(err).Param != param {
			t.Errorf("%s: %v, want param %s", body, err, param)
		}
	}
}
