--[[
  A reader's view of a stored `s` (the scripts that read users without changing them, and the
  user boost admin script): the value of a state key given as its index in the state array and
  its name (src/store/state-slots.ts readArgs), in either layout: the array, or the map keyed by
  names of states written before it. false when absent.
]]
local function stateValue(state, index, name)
  local value
  if state[1] ~= nil then value = state[tonumber(index)] else value = state[name] end
  if value == nil then return false end
  return value
end
