import Foundation
import Testing

@testable import LeapSDK
@testable import LeapSDKCore

@Suite struct ChatMessageBasics {
    @Test func textContentJoinsTextParts() {
        let m = ChatMessage(role: .user, content: [.text("a"), .image(Data([1])), .text("b")])
        #expect(m.textContent == "ab")
        #expect(ChatMessage(role: .tool, textContent: "x").content == [.text("x")])
    }
}
