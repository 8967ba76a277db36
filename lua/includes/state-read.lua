--[[
  A reader's view of a stored `s` (the scripts that read users without changing them, and the
  user boost admin script): the value of a state key given as its index in the state array and
  its name (src/store/state-slots.ts readArgs), in either layout: the array, or the map keyed by
  names of states written before it. false when absent.
]]

-- The position of `_x` (names of a map-layout state no config had registered when it was
-- rewritten as an array): fixed names take the first positions of every registry, in the order
-- of src/store/state-slots.ts FIXED_STATE_NAMES, where `_x` is 13th (a unit test holds it there).
local UNKNOWN_INDEX = 13

local function stateValue(state, index, name)
  local value
  if state[1] ~= nil then
    value = state[tonumber(index)]
    -- A name registered after the state went to the array layout may still sit in `_x` until
    -- the user's next write moves it (includes/state.lua decodeState).
    if not value then
      local unknown = state[UNKNOWN_INDEX]
      if unknown then value = unknown[name] end
    end
  else
    value = state[name]
  end
  if value == nil then return false end
  return value
end
