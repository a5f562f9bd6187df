package people

import (
	"fmt"
	"testing"
)

func TestFairSharesAreMaxMin(t *testing.T) {
	for _, tc := range []struct {
		demands []int
		budget  int
		want    []int
	}{
		{[]int{10, 20}, 100, []int{10, 20}},
		{[]int{9000, 100, 100}, 1000, []int{800, 100, 100}},
		{[]int{9000, 9000}, 1001, []int{500, 501}},
		{[]int{300, 50, 9000, 200}, 1000, []int{300, 50, 450, 200}},
		{nil, 100, []int{}},
	} {
		got := fairShares(tc.demands, tc.budget)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("fairShares(%v, %d) = %v, want %v", tc.demands, tc.budget, got, tc.want)
		}
		sum := 0
		for _, s := range got {
			sum += s
		}
		if sum > tc.budget {
			t.Errorf("fairShares(%v, %d) hands out %d", tc.demands, tc.budget, sum)
		}
	}
}
