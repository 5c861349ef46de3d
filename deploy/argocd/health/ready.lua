-- Argo CD health check for swarmkit.dev Workspace, Skill, Agent and Topology.
-- Health follows the operator's Ready condition:
--   Ready=True                        -> Healthy (other False conditions are named in the message)
--   Ready=False                       -> Degraded (Accepted=False, i.e. an invalid spec, first)
--   Ready=Unknown, no status yet, or
--   status older than the generation  -> Progressing
--   Ready=False reason AwaitingReview -> Suspended (a swarm-authored skill waits for a human)
-- and, for a Topology or Agent with spec.promotion, Ready=True is not enough:
--   Promoted=Unknown                  -> Progressing (a candidate is being evaluated)
--   Promoted=False                    -> Degraded (the candidate failed its evaluation)
local hs = {}

local function find(conditions, type_)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == type_ then
      return c
    end
  end
  return nil
end

local function describe(c)
  local reason = c.reason or ""
  if c.message ~= nil and c.message ~= "" then
    if reason ~= "" then
      return reason .. ": " .. c.message
    end
    return c.message
  end
  return reason
end

-- Generation the operator last reconciled (0/absent means "not reported").
local function stale(observed)
  local generation = obj.metadata and obj.metadata.generation
  return generation ~= nil and observed ~= nil and observed > 0 and observed < generation
end

if obj.status == nil or obj.status.conditions == nil or #obj.status.conditions == 0 then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to reconcile"
  return hs
end

local conditions = obj.status.conditions
local accepted = find(conditions, "Accepted")
local ready = find(conditions, "Ready")

if stale(obj.status.observedGeneration) or (ready ~= nil and stale(ready.observedGeneration)) then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to reconcile generation " .. tostring(obj.metadata.generation)
  return hs
end

if accepted ~= nil and accepted.status == "False" then
  hs.status = "Degraded"
  hs.message = describe(accepted)
  return hs
end

if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Ready condition"
  return hs
end

local promoted = find(conditions, "Promoted")
if ready.status == "True" and promoted ~= nil and promoted.status ~= "True" then
  if promoted.status == "False" then
    hs.status = "Degraded"
  else
    hs.status = "Progressing"
  end
  hs.message = describe(promoted)
  return hs
end

if ready.status == "True" then
  hs.status = "Healthy"
  local warnings = {}
  for _, c in ipairs(conditions) do
    if c.status == "False" then
      table.insert(warnings, c.type .. "=False " .. describe(c))
    end
  end
  if #warnings > 0 then
    hs.message = describe(ready) .. " (" .. table.concat(warnings, "; ") .. ")"
  else
    hs.message = describe(ready)
  end
  return hs
end

if ready.status == "False" then
  if ready.reason == "AwaitingReview" then
    hs.status = "Suspended"
  else
    hs.status = "Degraded"
  end
  hs.message = describe(ready)
  return hs
end

hs.status = "Progressing"
hs.message = describe(ready)
return hs
