// Generated from the payloads the test sources use (every string literal that is a JSON object
// text with an "aps" key and no interpolation), for the differential test of the remote path.
// Regenerate by hand when useful; the test also reads the fuzz seeds and its own edge cases.
enum PayloadCorpus {
    static let fromTests: [String] = [
        #"{"Simulator Target Bundle":"com.example.cli","aps":{"alert":{"title":"From a file","body":"simctl style"},"sound":"default","badge":1}}"#,
        #"{"aps":{"alert":"from stdin"},"pad":""#,
        #"{"aps":{"alert":"by certificate"}}"#,
        #"{"aps":{},"call":1}"#,
        #"{"aps":{"event":"update","timestamp":1,"content-state":{}}}"#,
        #"{"aps":{"alert":"hi"}}"#,
        #"{"aps":{"alert":"quote \" backslash \\ solidus \/ slash / tab \t nl \n cr \r bs \b ff \f"}}"#,
        #"{"aps":{"alert":"nul \u0000 one \u0001 us \u001F del \u007f \u00e9 \uD83D\uDE00"},"k":"\u0022\u005c"}"#,
        #"{"aps":{}}"#,
        #"{"aps":{"alert":""},"q":"\"\"\"\"","b":"\\\\"}"#,
        #"""
{
  "aps" : {"alert":"Hé — 日本語 😀", "badge" : 3},
	"n": [1, -0, 2.5e3, true, null]
}
"""#,
        #"{"aps":{"alert":"Hello"}}"#,
        #"{"aps":{"alert":""#,
        #"{"aps":{"alert":"curl"}}"#,
        #"{"aps":{"alert":"fractional iat"}}"#,
        #"{"aps":{"alert":"before"}}"#,
        #"{"aps":{"alert":"after"}}"#,
        #"{"aps":{"alert":"old"}}"#,
        #"{"aps":{"alert":"new"}}"#,
        #"{"aps":{"alert":"once"}}"#,
        #"{"aps":{"alert":"same size"}}"#,
        #"{"aps":{"alert":{"title":"Game Request","body":"Bob wants to play poker"},"category":"GAME"},"gameID":"12345678"}"#,
        #"{"aps":{"alert":"1 : 0"}}"#,
        #"{"aps":{"alert":"2 : 0"}}"#,
        #"{"aps":{"alert":"late"}}"#,
        #"{"aps":{"alert":"on time"}}"#,
        #"{"aps":{"alert":"soon stale"}}"#,
        #"{"aps":{"alert":"keeps"}}"#,
        #"{"aps":{"content-available":1},"acme1":"bar","acme2":42}"#,
        #"{"aps":{"alert":"new mail","content-available":1}}"#,
        #"{"aps":{"content-available":1},"refresh":"feed"}"#,
        #"{"aps":{"alert":{"title":"(encrypted)","body":"x"},"mutable-content":"1"},"cipher":"olleh"}"#,
        #"{"aps":{"alert":"plain"}}"#,
        #"{"aps":{"alert":{"title":"(encrypted)","body":"x"},"mutable-content":1},"cipher":"olleh"}"#,
        #"{"aps":{"alert":"slow","mutable-content":1}}"#,
        #"{"aps":{"alert":"other"}}"#,
        #"{"aps":{"content-available":1},"feed":"new"}"#,
        #"{"aps":{"alert":"Please say something","category":"saySomethingCategory"}}"#,
        #"""
{"aps":{"alert":{"title":"Game Request","subtitle":"Five Card Draw","body":"Bob wants to play poker",
  "launch-image":"li.png","summary-arg":"Bob","summary-arg-count":2},
  "badge":9,"sound":"bingbong.aiff","thread-id":"t1","category":"GAME_INVITATION",
  "mutable-content":1,"content-available":1,"target-content-id":"win1","interruption-level":"time-sensitive",
  "relevance-score":0.75,"filter-criteria":"work"},"gameID":"12345678","n":3,"f":1.5,"b":true,"z":null}
"""#,
        #"{"aps":{"mutable-content":"1","alert":"x"}}"#,
        #"{"aps":{"mutable-content":0,"alert":"x"}}"#,
        #"{"aps":{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Shelly","Rick"],"title-loc-key":"T %@","title-loc-args":["x"],"subtitle-loc-key":"S","subtitle-loc-args":[]}}}"#,
        #"{"aps":{"timestamp":1685952000,"event":"update","content-state":{"a":1},"stale-date":1685955000,"dismissal-date":1685959000,"alert":{"title":{"loc-key":"%@ is knocked down!","loc-args":["Power Panda"]},"body":"b","sound":"HeroDown.mp4"}}}"#,
        #"{"aps":{"alert":"x","sound":{"critical":1,"name":"default","volume":0.5}}}"#,
        #"{"aps":{"sound":{"critical":1,"name":"alarm.caf","volume":7}}}"#,
        #"{"aps":{"sound":"default"}}"#,
        #"{"aps":{"content-changed":true,"input-push-token":1,"input-push-channel":"abc=","attributes-type":"A","attributes":{},"url-args":["x","y"],"ptt-push-type":"service-update"}}"#,
        #"{"aps":{"content-available":1},"acme1":"bar"}"#,
        #"{"aps":{"badge":"nine","alert":7,"interruption-level":"loud"}}"#,
        #"{"aps":{"alert":"x"}"#,
        #"{"aps":{"alert":{"title":"Hello \"you\"","body":"a\\b/c\nd"},"badge":1},"k":"é\u00e9"}"#,
        #"{"aps":{"alert":"x"}}"#,
        #"{"aps":{"alert":"Hé \"quoted\" \\ back\nslash"},"n":1}"#,
        #"""
{
  "aps" : {"alert":"Hé — 日本語 😀", "badge" : 3},
	"n": [1, -0, 2.5e3, true, null]
}
"""#,
        #"""
{"aps":{"alert":{"title":"Game Request","subtitle":"Five Card Draw","body":"Bob wants to play poker","launch-image":"launch.png"},
        "badge":9,"sound":{"critical":1,"name":"alarm.caf","volume":0.5},"thread-id":"game-42","category":"GAME_INVITATION",
        "content-available":1,"mutable-content":1,"target-content-id":"window-7","interruption-level":"time-sensitive",
        "relevance-score":0.75,"filter-criteria":"work"},
 "gameID":"12345678"}
"""#,
        #"{"aps":{"alert":"Hello","sound":"default"}}"#,
        #"{"aps":{"badge":1,"mutable-content":1}}"#,
        #"{"aps":{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Shelly","Rick"],"title-loc-key":"TITLE_FMT","title-loc-args":["A","B"],"subtitle-loc-key":"SUB","subtitle-loc-args":[3]}}}"#,
        #"{"aps":{"alert":{"loc-key":"Hi %@","loc-args":["Ann"]}}}"#,
        #"{"aps":{"alert":"a"}}"#,
        #"{"aps":{"alert":"p1"}}"#,
        #"{"aps":{"alert":"p2"}}"#,
    ]
}
