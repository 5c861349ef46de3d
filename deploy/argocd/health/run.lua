-- Argo CD health check for swarmkit.dev Run. Health follows the Succeeded condition (Tekton):
--   Succeeded=True                  -> Healthy
--   Succeeded=False                 -> Degraded (Failed, TimedOut, Cancelled, JobLost, ...)
--   Succeeded=Unknown               -> Progressing (Pending, Running, JobLost being recreated)
--   reason AwaitingReview           -> Suspended (the run stopped for a human decision)
--   no status yet                   -> Progressing
local hs = {}

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

local succeeded = nil
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Succeeded" then
      succeeded = c
    end
  end
end

if succeeded == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to start the run"
  return hs
end

if succeeded.reason == "AwaitingReview" then
  hs.status = "Suspended"
elseif succeeded.status == "True" then
  hs.status = "Healthy"
elseif succeeded.status == "False" then
  hs.status = "Degraded"
else
  hs.status = "Progressing"
end
hs.message = describe(succeeded)
return hs
