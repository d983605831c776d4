-- Argo CD health check for recovery.projection.io ProjectionRecovery and
-- ProjectionReconciliation (one script, registered under both kinds: see
-- docs/gitops.md). It reads only what the controller writes: status.state,
-- status.observedGeneration and the Ready/Reconciling/Stalled conditions.
--
--   ProjectionRecovery: CURRENT -> Healthy; CATCHING_UP, RETRYING, no status
--   yet or a status for an older generation -> Progressing; BLOCKED or any
--   Stalled=True (auto-recovery off while behind, missing Secret or schema,
--   duplicate scope, unusable spec) -> Degraded; spec.suspend -> Suspended.
--   ProjectionReconciliation: Ready -> Healthy; Stalled (drift waiting for
--   an approver, a refused apply, no recovery) -> Degraded; a run pending or
--   retrying, or an approved repair under way -> Progressing.
local hs = {}

local function condition(ctype)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == ctype then
      return c
    end
  end
  return nil
end

local function isTrue(ctype)
  local c = condition(ctype)
  return c ~= nil and c.status == "True"
end

local function num(v)
  if v == nil then
    return "0"
  end
  return string.format("%d", v)
end

local function withReason(prefix)
  local s = prefix
  if obj.status.reason ~= nil and obj.status.reason ~= "" then
    s = s .. " " .. obj.status.reason
  end
  if obj.status.message ~= nil and obj.status.message ~= "" then
    s = s .. ": " .. obj.status.message
  end
  return s
end

-- A status written for an older generation says nothing about the current
-- spec: whatever it shows, the controller has not caught up with the edit.
local function staleGeneration()
  local gen = obj.metadata.generation
  local observed = obj.status.observedGeneration
  if gen == nil then
    return false
  end
  return observed == nil or observed < gen
end

if obj.status == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the controller's first status"
  return hs
end
if staleGeneration() then
  hs.status = "Progressing"
  hs.message = string.format("the controller has not observed generation %s yet (status is for %s)",
    num(obj.metadata.generation), num(obj.status.observedGeneration))
  return hs
end

if obj.kind == "ProjectionReconciliation" then
  local stalled, ready, reconciling = condition("Stalled"), condition("Ready"), condition("Reconciling")
  if stalled ~= nil and stalled.status == "True" then
    hs.status = "Degraded"
    hs.message = stalled.reason .. ": " .. (stalled.message or "")
  elseif ready ~= nil and ready.status == "True" then
    hs.status = "Healthy"
    hs.message = ready.reason .. ": " .. (ready.message or "")
  elseif reconciling ~= nil and reconciling.status == "True" then
    hs.status = "Progressing"
    hs.message = reconciling.reason .. ": " .. (reconciling.message or "")
  elseif ready ~= nil then
    -- Drift found and an approved apply pending or retried: only Stalled
    -- (drift waiting for an approver) is Degraded.
    hs.status = "Progressing"
    hs.message = ready.reason .. ": " .. (ready.message or "")
  else
    hs.status = "Progressing"
    hs.message = "waiting for the controller's first status"
  end
  return hs
end

-- ProjectionRecovery.
if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  hs.message = string.format("spec.suspend is true: no cycle runs (last state %s, verified through %s)",
    obj.status.state or "none", num(obj.status.verifiedThroughSeq))
  return hs
end

local state = obj.status.state
local progress = string.format("verified through %s, boundary %s, lag %s",
  num(obj.status.verifiedThroughSeq), num(obj.status.observedBoundarySeq), num(obj.status.lag))

if state == "BLOCKED" then
  hs.status = "Degraded"
  hs.message = withReason("BLOCKED") .. " (" .. progress .. ")"
  return hs
end
if isTrue("Stalled") then
  -- No state of the scope explains it: the manager or the spec does
  -- (auto-recovery off while behind, a missing Secret or schema...).
  local c = condition("Stalled")
  hs.status = "Degraded"
  hs.message = c.reason .. ": " .. (c.message or "")
  return hs
end
if state == "CURRENT" and isTrue("Ready") then
  hs.status = "Healthy"
  hs.message = "CURRENT: " .. progress
  return hs
end
if state == "CATCHING_UP" then
  hs.status = "Progressing"
  hs.message = "CATCHING_UP: " .. progress
  return hs
end
if state == "RETRYING" then
  hs.status = "Progressing"
  hs.message = withReason("RETRYING") .. string.format(" (%s consecutive failures; %s)",
    num(obj.status.consecutiveFailures), progress)
  return hs
end
hs.status = "Progressing"
local c = condition("Reconciling")
if c ~= nil and c.status == "True" then
  hs.message = c.reason .. ": " .. (c.message or "")
else
  hs.message = "waiting for the first cycle"
end
return hs
