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

package engine

// Recover rebuilds the live engine state through seq by a strict replay of
// the log in dir, for a member that restarts over an existing log. Its
// outputs are not returned: they were published (or dropped) before.
func Recover(dir string, through int64) (*Engine, error) {
	r, err := ReplayAll(dir, through)
	if err != nil {
		return nil, err
	}
	return r.eng, nil
}
