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

package recon

// Select returns the actions an apply with opt would run, in plan order
// (Only and the irreversible opt-in). A caller that must check the selection
// before the apply (what the approver was shown) uses this, never a copy of
// the rule.
func Select(actions []Action, opt ApplyOptions) []Action {
	sel, _ := selectActions(actions, opt)
	return sel
}
