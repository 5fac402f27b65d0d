package rediskeys

import "testing"

// ClusterSlot follows Redis Cluster's hash tag rule; the numbers are
// CLUSTER KEYSLOT's.
func TestClusterSlot(t *testing.T) {
	for _, tt := range []struct {
		key  string
		want uint16
	}{
		{"foo", 12182}, {"somekey", 11058}, {"{foo}bar", 12182}, {"a{foo}b{c}", 12182},
		{"{}foo", Slot("{}foo")}, {"foo{", Slot("foo{")}, {"}{foo}", 12182}, {"x{}{foo}", Slot("x{}{foo}")},
	} {
		if got := ClusterSlot(tt.key); got != tt.want {
			t.Errorf("ClusterSlot(%q) = %d; want %d", tt.key, got, tt.want)
		}
		if got := ClusterSlot(hashTag(Bare(tt.key).Fence)); Slot(hashTag(Bare(tt.key).Fence)) != tt.want {
			t.Errorf("the fence counter of %q, %q, is in slot %d; want %d", tt.key, Bare(tt.key).Fence, got, tt.want)
		}
	}
}
